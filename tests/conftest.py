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


def pytest_terminal_summary(terminalreporter):
    """Name the threads the tests left running. A thread still inside torch or another native library while the
    interpreter shuts down can crash it after every test has passed (`make test` runs Python with -X faulthandler
    so that such a crash prints every thread's stack); this list says which threads were left to do so."""
    import threading

    left = [thread for thread in threading.enumerate() if thread is not threading.main_thread()]
    if left:
        terminalreporter.write_line(f"threads still running after the tests ({len(left)}): "
                                    + ", ".join(f"{t.name}{' (daemon)' if t.daemon else ''}" for t in left))
