"""Fragmentation against a slow reference written from the paper's definition, and the target workload."""

import numpy as np
import pytest

from menger.apps.gpucluster.cluster import ClusterState, Task, task_list
from menger.apps.gpucluster.frag import fragmentation, target_workload
from menger.apps.gpucluster.trace import Nodes, Tasks


def slow_fragmentation(cpu_left, gpu_left, model_bit, workload):
    """Per node: sum over classes of weight x (the free share on GPUs too full for the class when the class fits
    the node, else the whole free share), as GetNodePodFrag and NodeGpuShareFragAmount define it."""
    out = []
    for cpu, left, bit in zip(cpu_left, gpu_left, model_bit):
        total, value = sum(left), 0.0
        for k in range(len(workload)):
            milli, count, models = workload.gpu_milli[k], workload.num_gpu[k], workload.models[k]
            fits = (milli > 0 and (models == 0 or bit & models) and cpu >= workload.cpu_milli[k]
                    and sum(1 for g in left if g >= milli) >= count)
            value += workload.weight[k] * (sum(g for g in left if g < milli) if fits else total)
        out.append(value)
    return np.array(out)


def test_fragmentation_matches_the_slow_reference_on_random_nodes():
    rng = np.random.default_rng(0)
    tasks = [Task(int(rng.integers(1, 5)) * 4000, 0, int(k), int(m), int(rng.integers(0, 4)))
             for k, m in zip(rng.choice([0, 1, 1, 1, 2], 300), rng.choice([0, 250, 500, 800, 1000], 300))]
    tasks = [Task(t.cpu_milli, 0, 0, 0, 0) if t.num_gpu == 0 or t.gpu_milli == 0 else
             Task(t.cpu_milli, 0, t.num_gpu, 1000 if t.num_gpu > 1 else t.gpu_milli, t.models) for t in tasks]
    workload = target_workload(tasks, popularity=1.0)
    cpu_left = rng.integers(0, 20000, 200)
    gpu_left = rng.choice([0, 100, 250, 500, 700, 1000], (200, 8))
    model_bit = rng.choice([1, 2, 4], 200)
    fast = fragmentation(cpu_left, gpu_left, model_bit, workload)
    assert fast == pytest.approx(slow_fragmentation(cpu_left, gpu_left, model_bit, workload))
    assert len(set(np.round(fast, 6))) > 50  # the random nodes are not all alike


def test_target_workload_keeps_the_most_frequent_shapes_up_to_the_popularity():
    tasks = [Task(1000, 0, 1, 500)] * 6 + [Task(2000, 0, 1, 1000)] * 3 + [Task(4000, 0, 0, 0)] * 1
    full = target_workload(tasks, popularity=1.0)
    assert full.weight.tolist() == pytest.approx([0.6, 0.3, 0.1])
    assert full.gpu_milli.tolist() == [500, 1000, 0] and full.num_gpu.tolist() == [1, 1, 0]
    kept = target_workload(tasks, popularity=0.9)  # 6 + 3 of 10 tasks reach 90 %
    assert kept.weight.tolist() == pytest.approx([6 / 9, 3 / 9])
    assert len(target_workload(tasks, popularity=0.5)) == 1
    assert len(target_workload(tasks, popularity=1.0, include_cpu_tasks=False)) == 2
    with pytest.raises(ValueError, match="popularity"):
        target_workload(tasks, popularity=0)


def test_a_node_with_all_gpus_idle_has_no_fragment_for_tasks_that_fit():
    nodes = Nodes(("a", "b"), np.array([8000, 8000]), np.array([1, 1]), np.array([2, 2]), np.array([0, 0]), ("T4",))
    state = ClusterState(nodes)
    workload = target_workload([Task(1000, 0, 1, 500)], popularity=1.0)
    assert fragmentation(state.cpu_left, state.gpu_left, state.model_bit, workload).tolist() == [0.0, 0.0]
    state.place(0, Task(1000, 0, 1, 700), [0])   # GPU 0 keeps 300: too little for a 500 task
    assert fragmentation(state.cpu_left, state.gpu_left, state.model_bit, workload).tolist() == [300.0, 0.0]
    state.place(1, Task(8000, 0, 0, 0))          # no CPU left: every idle GPU is a fragment
    assert fragmentation(state.cpu_left, state.gpu_left, state.model_bit, workload).tolist() == [300.0, 2000.0]


def test_task_list_resolves_gpu_models_to_bits():
    tasks = Tasks(("a", "b"), np.array([1, 2]), np.array([0, 0]), np.array([1, 1]), np.array([500, 1000]),
                  (frozenset(), frozenset({"T4", "G2"})))
    records = task_list(tasks, ("A10", "G2", "T4"))
    assert records[0].models == 0 and records[1].models == 0b110
