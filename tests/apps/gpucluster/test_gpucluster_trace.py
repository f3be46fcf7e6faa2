"""The trace's node and task files: read as published, written back the same, bad rows named by file, line and
column, and nothing half loaded."""

import numpy as np
import pytest

from menger.apps.gpucluster.trace import (TraceError, check_fits, read_nodes, read_tasks, write_nodes,
                                          write_tasks)


def test_nodes_are_read_as_published(small_trace):
    nodes = read_nodes(small_trace[0])
    assert nodes.names == ("n0", "n1", "n2")
    assert nodes.cpu_milli.tolist() == [32000, 64000, 96000]
    assert nodes.memory_mib.tolist() == [65536, 262144, 131072]
    assert nodes.gpus.tolist() == [2, 8, 0] and nodes.total_gpus == 10
    assert nodes.models == ("G2", "T4")
    assert nodes.model.tolist() == [1, 0, -1]


def test_tasks_are_read_as_published(small_trace):
    tasks = read_tasks(small_trace[1])
    assert tasks.names == ("p0", "p1", "p2", "p3")
    assert tasks.num_gpu.tolist() == [1, 2, 0, 1]
    assert tasks.gpu_milli.tolist() == [500, 1000, 0, 1000]
    assert tasks.gpu_demand.tolist() == [500, 2000, 0, 1000]
    assert tasks.gpu_spec == (frozenset(), frozenset({"G2"}), frozenset(), frozenset({"T4", "G2"}))
    taken = tasks.take(np.array([3, 3, 0]))
    assert taken.names == ("p3", "p3", "p0") and taken.cpu_milli.tolist() == [6000, 6000, 4000]


def test_written_files_read_back_the_same(small_trace, tmp_path):
    nodes, tasks = read_nodes(small_trace[0]), read_tasks(small_trace[1])
    write_nodes(tmp_path / "n.csv", nodes)
    write_tasks(tmp_path / "t.csv", tasks)
    again_nodes, again_tasks = read_nodes(tmp_path / "n.csv"), read_tasks(tmp_path / "t.csv")
    assert again_nodes.names == nodes.names and again_nodes.models == nodes.models
    assert (again_nodes.model == nodes.model).all() and (again_nodes.gpus == nodes.gpus).all()
    assert again_tasks.gpu_spec == tasks.gpu_spec and (again_tasks.gpu_demand == tasks.gpu_demand).all()


@pytest.mark.parametrize("line, column, bad, message", [
    (3, "cpu_milli", "6k", r"line 3, column 'cpu_milli': expected a whole number, found '6k'"),
    (2, "gpu_milli", "1200", r"line 2, column 'gpu_milli': 1200 is out of range \(0..1000\)"),
    (3, "gpu_milli", "500", r"line 3, column 'gpu_milli': a task asking for 2 GPUs takes them whole"),
    (5, "num_gpu", "-1", r"line 5, column 'num_gpu': -1 is out of range"),
    (2, "gpu_milli", "0", r"line 2, column 'gpu_milli': a task asking for 1 GPUs must ask for a share"),
])
def test_a_bad_task_row_names_file_line_and_column(write_file, texts, line, column, bad, message):
    rows = [row.split(",") for row in texts[1].strip().split("\n")]
    rows[line - 1][rows[0].index(column)] = bad
    path = write_file("\n".join(",".join(row) for row in rows) + "\n", "tasks.csv")
    with pytest.raises(TraceError, match=message) as caught:
        read_tasks(path)
    assert str(caught.value).startswith(path)


def test_a_bad_node_row_names_file_line_and_column(write_file, texts):
    NODES = texts[0]
    with pytest.raises(TraceError, match=r"nodes.csv line 3, column 'gpu': expected a whole number, found 'x'"):
        read_nodes(write_file(NODES.replace("262144,8,G2", "262144,x,G2"), "nodes.csv"))
    with pytest.raises(TraceError, match=r"line 2, column 'model': a node with 2 GPUs must name their model"):
        read_nodes(write_file(NODES.replace(",2,T4", ",2,"), "nodes.csv"))
    with pytest.raises(TraceError, match=r"line 4, column 'sn': node 'n0' is already named on line 2"):
        read_nodes(write_file(NODES.replace("n2,", "n0,"), "nodes.csv"))


def test_short_rows_headers_and_missing_files_are_refused(write_file, texts, tmp_path):
    NODES, TASKS = texts
    with pytest.raises(TraceError, match=r"line 3: 4 fields, the header has 5"):
        read_nodes(write_file(NODES.replace("64000,262144,8,G2", "64000,8,G2"), "nodes.csv"))
    with pytest.raises(TraceError, match=r"line 2: 7 fields, the header has 5"):
        read_nodes(write_file(NODES.replace("65536,2,T4", "65536,2,T4,x,y"), "nodes.csv"))
    with pytest.raises(TraceError, match=r"header lacks \['gpu_milli'\]"):
        read_tasks(write_file(TASKS.replace("gpu_milli", "gpu_share"), "tasks.csv"))
    with pytest.raises(TraceError, match=r"no tasks found"):
        read_tasks(write_file(TASKS.split("\n")[0] + "\n", "tasks.csv"))
    with pytest.raises(TraceError, match=r"does not exist.*not shipped.*alibaba/clusterdata"):
        read_tasks(tmp_path / "absent.csv")


def test_tasks_for_models_the_cluster_lacks_are_refused(small_trace, write_file, texts):
    nodes = read_nodes(small_trace[0])
    check_fits(nodes, read_tasks(small_trace[1]))
    odd = read_tasks(write_file(texts[1].replace("T4|G2", "A100"), "tasks.csv"))
    with pytest.raises(TraceError, match=r"task 'p3' may run only on GPU models \['A100'\].*models: \['G2', 'T4'\]"):
        check_fits(nodes, odd)


def test_a_task_file_without_gpu_spec_allows_any_model(write_file, texts):
    rows = [row.split(",")[:5] for row in texts[1].strip().split("\n")]
    tasks = read_tasks(write_file("\n".join(",".join(row) for row in rows) + "\n", "tasks.csv"))
    assert tasks.gpu_spec == (frozenset(),) * 4 and tasks.gpu_milli.tolist() == [500, 1000, 0, 1000]
