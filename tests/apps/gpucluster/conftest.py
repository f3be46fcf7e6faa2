import pytest

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,32000,65536,2,T4
n1,64000,262144,8,G2
n2,96000,131072,0,
"""

TASKS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,4000,8192,1,500,,LS,Running,0,10,0
p1,8000,16384,2,1000,G2,LS,Running,1,10,1
p2,2000,4096,0,0,,BE,Failed,2,10,2
p3,6000,12288,1,1000,T4|G2,LS,Running,3,10,3
"""


@pytest.fixture
def write_file(tmp_path):
    """Write text to a file under tmp_path and return its path."""

    def write(text: str, name: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write


@pytest.fixture
def texts():
    """(node file text, task file text) of the small trace."""
    return NODES, TASKS


@pytest.fixture
def small_trace(write_file):
    """(nodes path, tasks path) of a three-node cluster and four tasks in the trace's formats."""
    return write_file(NODES, "nodes.csv"), write_file(TASKS, "tasks.csv")
