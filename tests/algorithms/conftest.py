import pytest

QUIET = ["log.tensorboard=false", "log.progress=false"]


@pytest.fixture
def quiet():
    return list(QUIET)
