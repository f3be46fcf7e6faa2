"""Each heuristic on small clusters whose right answer is worked out by hand, masking (no placement that does not
fit), and the evaluation's inflation and allocation curve."""

import numpy as np
import pytest

from menger.apps.gpucluster.cluster import ClusterState, Task
from menger.apps.gpucluster.evaluate import allocation_curve, inflated_order, run
from menger.apps.gpucluster.frag import target_workload
from menger.apps.gpucluster.policies import (HEURISTICS, FragmentationGradientDescent, best_fit_scores,
                                             dot_product_scores, gpu_clustering_scores, gpu_packing_scores,
                                             make_scheduler)
from menger.apps.gpucluster.trace import Nodes


def cluster(gpus, cpu=None, models=None, names=("T4", "G2")):
    count = len(gpus)
    cpu = np.array(cpu if cpu is not None else [64000] * count)
    model = np.array(models if models is not None else [0] * count)
    return ClusterState(Nodes(tuple(f"n{i}" for i in range(count)), cpu, np.full(count, 1 << 20),
                              np.array(gpus), model, names))


def test_feasibility_checks_cpu_memory_models_and_gpus():
    state = cluster([2, 8, 0], cpu=[8000, 64000, 96000], models=[0, 1, -1])
    assert state.feasible(Task(9000, 0, 0, 0)).tolist() == [False, True, True]
    assert state.feasible(Task(1000, 0, 1, 500)).tolist() == [True, True, False]
    assert state.feasible(Task(1000, 0, 4, 1000)).tolist() == [False, True, False]
    assert state.feasible(Task(1000, 0, 1, 500, models=0b01)).tolist() == [True, False, False]
    assert state.feasible(Task(1000, 2 << 20, 0, 0)).tolist() == [False, False, False]
    state.place(0, Task(1000, 0, 1, 700), [0])
    state.place(0, Task(1000, 0, 1, 700), [1])
    assert state.feasible(Task(1000, 0, 1, 400)).tolist() == [False, True, False]
    assert state.feasible(Task(1000, 0, 1, 300)).tolist() == [True, True, False]
    with pytest.raises(ValueError, match="does not fit"):
        state.place(0, Task(1000, 0, 1, 400))
    with pytest.raises(ValueError, match="cannot hold"):
        state.place(1, Task(1000, 0, 2, 1000), [0, 0])
    assert state.gpu_left[0].tolist()[:2] == [300, 300] and state.cpu_left[0] == 6000


def test_best_fit_prefers_the_node_left_fullest():
    state = cluster([8, 8, 2], cpu=[64000, 32000, 64000])
    feasible = np.arange(3)
    task = Task(4000, 0, 1, 1000)
    # free after: (60000/128000 + 7000/8000)/2, (28000/128000 + 7000/8000)/2, (60000/128000 + 1000/8000)/2
    assert best_fit_scores(state, task, feasible).tolist() == [32.0, 45.0, 70.0]


def test_dot_product_prefers_the_smallest_alignment():
    state = cluster([8, 2], cpu=[64000, 64000])
    scores = dot_product_scores(state, Task(64000, 0, 1, 1000), np.arange(2))
    # dot = 0.5 * 0.5 + (gpus/8) * (1/8); score = trunc(100 * (1 - dot / 2))
    assert scores.tolist() == [np.trunc(100 * (1 - (0.25 + 1 / 8) / 2)), np.trunc(100 * (1 - (0.25 + 2 / 64) / 2))]


def test_gpu_packing_prefers_used_gpus_then_used_nodes_then_idle_ones():
    state = cluster([8, 8, 8, 4])
    state.place(0, Task(1000, 0, 1, 600), [3])       # node 0: one GPU with 400 left
    state.place(1, Task(1000, 0, 1, 1000), [0])      # node 1: used, but no partial GPU
    task = Task(1000, 0, 1, 300)
    scores = gpu_packing_scores(state, task, np.arange(4))
    assert scores.tolist() == [100 - 40 // 10, 50 - 1, 33 - 8, 33 - 4]
    node, gpus = make_scheduler("gpu-packing", None, np.arange(4), None).place(state, task, np.arange(4))
    assert node == 0 and gpus.tolist() == [3]        # the fullest GPU it fits on


def test_gpu_clustering_groups_tasks_of_the_same_kind():
    state = cluster([8, 8, 8, 8])
    state.place(0, Task(1000, 0, 1, 500))            # shared GPUs only
    state.place(1, Task(1000, 0, 1, 500))
    state.place(1, Task(1000, 0, 2, 1000))           # mixed
    state.place(3, Task(1000, 0, 2, 1000))           # whole GPUs only
    shared = gpu_clustering_scores(state, Task(1000, 0, 1, 250), np.arange(4))
    # band by the kinds on the node, plus a quarter of 100 scaled by the GPU share in use (of 8 GPUs)
    assert shared.tolist() == [75 + 25 * 500 // 8000, 50 + 25 * 2500 // 8000, 25 + 0, 0 + 25 * 2000 // 8000]
    assert gpu_clustering_scores(state, Task(1000, 0, 0, 0), np.arange(4)).tolist() == [0, 0, 0, 0]


def test_fgd_puts_a_task_where_fragmentation_grows_least():
    # the workload is all 500-milli tasks: a GPU with 500 left is no fragment, one with 300 is
    state = cluster([1, 1])
    state.place(0, Task(1000, 0, 1, 500))            # node 0 has 500 left, node 1 is idle
    workload = target_workload([Task(1000, 0, 1, 500)], popularity=1.0)
    fgd = FragmentationGradientDescent(workload, rank=np.array([1, 0]))
    task = Task(1000, 0, 1, 200)                     # leaves 300 on node 0 (frag +300) or 800 on node 1 (+0)
    assert fgd.place(state, task, np.arange(2))[0] == 1
    fill = Task(1000, 0, 1, 500)                     # fills node 0 exactly (frag stays 0)
    scores, _ = fgd.scores(state, fill, np.arange(2))
    assert scores[0] >= scores[1]


def test_fgd_picks_the_gpu_within_a_node_and_caches_until_the_node_changes():
    state = cluster([2])
    state.place(0, Task(1000, 0, 1, 500), [0])       # GPU 0: 500 left, GPU 1: 1000
    workload = target_workload([Task(1000, 0, 1, 500)], popularity=1.0)
    fgd = FragmentationGradientDescent(workload, rank=np.array([0]))
    node, gpus = fgd.place(state, Task(1000, 0, 1, 500), np.array([0]))
    assert (node, gpus.tolist()) == (0, [0])         # filling GPU 0 leaves no fragment; GPU 1 would leave 500
    before = fgd.scores(state, Task(1000, 0, 1, 500), np.array([0]))
    state.place(0, Task(1000, 0, 1, 500), [0])
    after = fgd.scores(state, Task(1000, 0, 1, 500), np.array([0]))
    assert before[1].tolist() == [0] and after[1].tolist() == [1]


def test_ties_go_to_the_node_ranked_first():
    state = cluster([8, 8, 8])
    for rank, expected in (([2, 0, 1], 1), ([0, 1, 2], 0), ([1, 2, 0], 2)):
        scheduler = make_scheduler("best-fit", None, np.array(rank), None)
        assert scheduler.place(state, Task(1000, 0, 1, 1000), np.arange(3))[0] == expected


@pytest.mark.parametrize("name", HEURISTICS)
def test_no_scheduler_ever_places_a_task_where_it_does_not_fit(name):
    rng = np.random.default_rng(3)
    state = cluster(rng.choice([1, 2, 4, 8], 12).tolist(), cpu=rng.choice([8000, 32000], 12).tolist(),
                    models=rng.choice([0, 1], 12).tolist())
    shapes = [Task(2000, 0, 1, 250), Task(4000, 0, 1, 500), Task(8000, 0, 1, 1000), Task(6000, 0, 2, 1000),
              Task(3000, 0, 0, 0), Task(2000, 0, 1, 700, models=0b10), Task(16000, 0, 4, 1000)]
    tasks = [shapes[i] for i in rng.integers(len(shapes), size=400)]
    scheduler = make_scheduler(name, target_workload(tasks), rng.permutation(12), rng)
    record = run(state, tasks, list(range(len(tasks))), scheduler)   # place() raises on an unfit choice
    assert (state.gpu_left >= 0).all() and (state.cpu_left >= 0).all()
    assert record.placed.sum() < len(tasks)                           # the cluster filled up
    assert record.allocated_milli[-1] == state.gpu_milli_allocated


def test_inflation_shuffles_the_trace_then_draws_until_the_ratio():
    tasks = [Task(1000, 0, 1, 500), Task(1000, 0, 1, 1000), Task(1000, 0, 0, 0)]
    order = inflated_order(tasks, total_gpu_milli=4000, rng=np.random.default_rng(0), ratio=1.3)
    assert sorted(order[:3]) == [0, 1, 2]
    demand = sum(tasks[i].gpu_demand for i in order)
    assert 5200 - 1000 < demand <= 5200
    short = inflated_order(tasks, total_gpu_milli=1000, rng=np.random.default_rng(0), ratio=1.0)
    assert sum(tasks[i].gpu_demand for i in short) <= 1000 and len(short) < 3


def test_the_allocation_curve_bins_arrivals_by_whole_percent():
    arrived = np.array([100, 200, 300, 400, 1000])
    allocated = np.array([100, 200, 200, 300, 400])
    curve = allocation_curve(arrived, allocated, total_gpu_milli=1000, percents=np.array([10, 20, 30, 50, 100]))
    # 50 % has no arrival of its own and none within one percent
    assert curve[:3].tolist() == [10.0, 20.0, 20.0] and np.isnan(curve[3]) and curve[4] == 40.0
    neighbours = allocation_curve(np.array([100, 120]), np.array([100, 200]), 1000, np.array([11]))
    assert neighbours.tolist() == [15.0]             # 11 % has no arrival: those at 10 and 12 % stand in
