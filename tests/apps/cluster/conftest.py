import pytest


@pytest.fixture
def write_trace(tmp_path):
    """Write CSV text to a file and return its path."""

    def write(text: str, name: str = "jobs.csv"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write
