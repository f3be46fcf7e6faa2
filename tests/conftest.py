import os

# Any Ray instance a test starts is a single-machine one: its nodes bind to 127.0.0.1, never to the machine's
# network interfaces. Set before anything imports ray (Ray reads it once, at import).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import pytest  # noqa: E402 - after the environment above

QUIET = ["log.tensorboard=false", "log.progress=false"]  # what a test's training run leaves out


@pytest.fixture
def quiet():
    """--set overrides that keep a test's run to its metrics: no TensorBoard files, no progress display."""
    return list(QUIET)
