"""GpuSharing-v0: only nodes the task fits are offered, every arriving GPU is accounted for, the policy network
starts at FGD's choice on a cluster of any size, and a trained policy is measured as the heuristics are."""

import numpy as np
import pytest
import torch

from menger.apps.gpucluster.cluster import ClusterState, task_list
from menger.apps.gpucluster.env import FGD_SCORE_FEATURE, NODES_KEY, GpuSharingEnv
from menger.apps.gpucluster.evaluate import evaluate
from menger.apps.gpucluster.frag import target_workload
from menger.apps.gpucluster.learned import LearnedScheduler
from menger.apps.gpucluster.policy import NodeScorerNet
from menger.apps.gpucluster.synthetic import synthetic_nodes, synthetic_tasks
from menger.models.encoders import MASK_KEY


def play(env, choose, seed=0):
    obs, _ = env.reset(seed=seed)
    rewards, steps = [], 0
    while True:
        task, feasible = env._task, np.flatnonzero(env.state.feasible(env._task))
        assert np.flatnonzero(obs[MASK_KEY]).tolist() == feasible.tolist() and len(feasible) >= 2, task
        obs, reward, terminated, truncated, info = env.step(choose(obs))
        rewards.append(reward)
        steps += 1
        if terminated:
            return rewards, info, steps


def test_only_feasible_nodes_are_offered_and_every_gpu_is_accounted_for():
    env = GpuSharingEnv(num_nodes=12, synthetic_tasks=600)
    rng = np.random.default_rng(0)
    rewards, info, steps = play(env, lambda obs: rng.choice(np.flatnonzero(obs[MASK_KEY])))
    arrived = sum(env._tasks[i].gpu_demand for i in env._order)
    dropped = -sum(rewards) / 100 * env.state.total_gpu_milli
    assert env.state.gpu_milli_allocated + dropped == pytest.approx(arrived)
    assert info["final_allocation"] == pytest.approx(100 * env.state.gpu_milli_allocated / env.state.total_gpu_milli)
    assert 0 < info["allocation_at_100"] <= 100 and dropped > 0 and steps > 20
    assert arrived <= 1.3 * env.state.total_gpu_milli


def test_a_node_the_task_does_not_fit_is_refused_by_name():
    env = GpuSharingEnv(num_nodes=12, synthetic_tasks=600)
    obs, _ = env.reset(seed=1)
    while obs[MASK_KEY].all():
        obs, *_ = env.step(0)
    with pytest.raises(ValueError, match=r"node \d+ cannot take the task: choose one where action_mask is 1"):
        env.step(int(np.flatnonzero(obs[MASK_KEY] == 0)[0]))


def test_episodes_are_seeded():
    env = GpuSharingEnv(num_nodes=8, synthetic_tasks=400)
    first = play(env, lambda obs: int(np.flatnonzero(obs[MASK_KEY])[0]), seed=5)
    again = play(env, lambda obs: int(np.flatnonzero(obs[MASK_KEY])[0]), seed=5)
    assert first[0] == again[0] and first[1] == again[1]


def test_the_node_file_and_trace_are_subsampled_per_episode(tmp_path):
    from menger.apps.gpucluster.trace import write_nodes, write_tasks
    rng = np.random.default_rng(0)
    write_nodes(tmp_path / "nodes.csv", synthetic_nodes(40, rng))
    write_tasks(tmp_path / "tasks.csv", synthetic_tasks(500, rng))
    env = GpuSharingEnv(nodes=str(tmp_path / "nodes.csv"), trace=[str(tmp_path / "tasks.csv"), "synthetic"],
                        num_nodes=10)
    names = set()
    for seed in range(3):
        env.reset(seed=seed)
        assert len(env.state) == 10
        names.add(env.state.nodes.names)
    assert len(names) == 3
    with pytest.raises(ValueError, match="is not a file"):
        GpuSharingEnv(nodes=str(tmp_path / "absent.csv"))
    with pytest.raises(ValueError, match="at least 2 \\(with one node there is no choice to make\\), got 1"):
        GpuSharingEnv(num_nodes=1)
    with pytest.raises(ValueError, match="no setting 'num_node' \\(did you mean 'num_nodes'\\?\\)"):
        GpuSharingEnv(num_node=8)


def test_the_untrained_network_picks_fgds_node_on_clusters_of_any_size():
    env = GpuSharingEnv(num_nodes=16, synthetic_tasks=800)
    net = NodeScorerNet(env.observation_space, env.action_space, hidden=16)
    obs, _ = env.reset(seed=2)
    for _ in range(40):
        with torch.no_grad():
            logits, value = net({k: torch.as_tensor(v)[None] for k, v in obs.items()})
        scores = np.where(obs[MASK_KEY] == 1, obs[NODES_KEY][:, FGD_SCORE_FEATURE], -1)
        masked = logits[0].masked_fill(torch.as_tensor(obs[MASK_KEY]) == 0, -1e9)
        assert int(masked.argmax()) == int(np.argmax(scores)) and value.shape == (1,)
        obs, *_ = env.step(int(np.argmax(scores)))
    big = {NODES_KEY: torch.rand(3, 200, obs[NODES_KEY].shape[1]), MASK_KEY: torch.ones(3, 200)}
    logits, value = net(big)
    assert logits.shape == (3, 200) and value.shape == (3,)


def test_a_bounded_residual_departs_from_fgd_only_among_nodes_it_scores_alike():
    torch.manual_seed(0)
    env = GpuSharingEnv(num_nodes=16, synthetic_tasks=800)
    net = NodeScorerNet(env.observation_space, env.action_space, hidden=16, fgd_prior=1000.0, residual_bound=15.0)
    with torch.no_grad():  # a learnt part far larger than the bound
        net.score[-1].bias.fill_(0.0)
        net.score[-1].weight.normal_(0.0, 50.0)
    rows = torch.rand(2, 30, env.observation_space[NODES_KEY].shape[1])
    prior = 1000.0 * rows[..., FGD_SCORE_FEATURE]
    with torch.no_grad():
        logits, _ = net({NODES_KEY: rows, MASK_KEY: torch.ones(2, 30)})
    residual = logits - prior
    assert residual.abs().max() < 15.0 and residual.abs().max() > 5.0
    # so the node chosen greedily is never more than 3 FGD points (30 logits) below FGD's own
    chosen = prior.gather(1, logits.argmax(dim=1, keepdim=True)).squeeze(1)
    assert torch.all(prior.amax(dim=1) - chosen < 30.0)
    with pytest.raises(ValueError, match="residual_bound must be >= 0"):
        NodeScorerNet(env.observation_space, env.action_space, residual_bound=-1.0)


class GreedyOnFgd:
    """A stand-in trained policy: the node with the highest FGD score, the first among equals."""

    def act(self, observation, deterministic=True):
        rows, mask = observation[NODES_KEY][0], observation[MASK_KEY][0]
        return np.array([int(np.argmax(np.where(mask == 1, rows[:, FGD_SCORE_FEATURE], -1)))])


def test_a_learned_scheduler_is_measured_like_the_heuristics():
    rng = np.random.default_rng(4)
    nodes = synthetic_nodes(24, rng)
    tasks = task_list(synthetic_tasks(1500, rng), nodes.models)
    workload = target_workload(tasks)
    state = ClusterState(nodes)
    fgd = evaluate(state, tasks, workload, "fgd", seed=9)
    learned = evaluate(state, tasks, workload, lambda w, rank, _: LearnedScheduler(GreedyOnFgd(), w, rank), seed=9)
    # FGD's node (first-ranked among equal scores) and GPU, so the very same run
    assert np.array_equal(fgd.allocated_milli, learned.allocated_milli)
    assert fgd.placed.sum() < len(fgd.placed)
