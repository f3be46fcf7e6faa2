import pytest

QUIET = ["log.tensorboard=false", "log.progress=false", "runtime.learner.device=cpu"]


@pytest.fixture
def quiet():
    return list(QUIET)
