"""Keeping the cheapest deterministic rollout among a run's checkpoints (`menger place --method rl`)."""

import numpy as np
import pytest
import torch

from menger.checkpoint import CheckpointManager, flatten_state
from menger.apps.chip import load_problem
from menger.apps.chip.costs import ProxyCost
from menger.apps.chip.env import GRID_MAPS, ChipPlacementEnv
from menger.apps.chip.selection import BestRollout, CheckpointRollouts, Rollout, deterministic_rollout, summary
from menger.experiment import load_experiment
from menger.models import build_policy

from .helpers import assert_legal

DESIGN = "toy_macro_stdcell"


@pytest.fixture(scope="module")
def toy():
    return load_problem(DESIGN)


@pytest.fixture(scope="module")
def config():
    return load_experiment("chip-ppo", [f"env.kwargs.netlist={DESIGN}", "model.kwargs.channels=4",
                                        "model.kwargs.layers=1"])


def network_with_prior(toy, config, prior: float):
    """The run's network with the greedy-cost prior set to `prior` (negative: greedy; positive: its opposite)."""
    env = ChipPlacementEnv(problem=toy)
    network = build_policy(env.observation_space, env.action_space, config.model)
    with torch.no_grad():
        network.custom.prior.weight[0, GRID_MAPS.index("greedy_cost")] = prior
    return network


def save(run_dir, step, network):
    tensors, meta = flatten_state({"learner": {"model": network.state_dict()}})
    CheckpointManager(run_dir / "checkpoints").save(step, tensors, meta)


def test_best_rollout_keeps_the_cheapest_placed_one():
    best = BestRollout()
    cheap, dear = ProxyCost(0.1, 0.2, 0.3), ProxyCost(0.2, 0.2, 0.3)
    best.offer(Rollout(1, None, dear, dear.weighted()))
    best.offer(Rollout(2, None, None, float("inf")))  # boxed in: never kept
    best.offer(Rollout(3, None, cheap, cheap.weighted()))
    best.offer(Rollout(4, None, dear, dear.weighted()))
    assert best.best.step == 3 and [r.step for r in best.history] == [1, 2, 3, 4]
    assert summary(best.history)["best_step"] == 3
    assert summary(best.history)["spread"] == pytest.approx(0.1)


def test_checkpoint_rollouts_score_each_new_checkpoint_once_and_keep_the_cheapest(tmp_path, toy, config):
    greedy_net = network_with_prior(toy, config, -300.0)
    contrary_net = network_with_prior(toy, config, 300.0)
    watcher = CheckpointRollouts(tmp_path, toy, config)
    assert watcher.poll() is None  # nothing saved yet
    save(tmp_path, 5, contrary_net)
    contrary = watcher.poll()
    assert contrary.step == 5 and watcher.poll() is None  # the same checkpoint is not rolled out twice
    save(tmp_path, 9, greedy_net)
    greedy = watcher.poll()
    assert greedy.proxy < contrary.proxy, "the greedy prior should place better than its opposite"
    best = watcher.finish()
    assert best.step == 9 and [r.step for r in watcher.history] == [5, 9]
    assert_legal(toy, best.layout)
    layout, cost = deterministic_rollout(watcher._policy(greedy_net.state_dict()), toy)
    np.testing.assert_allclose(layout.x, best.layout.x)
    assert cost.weighted() == pytest.approx(best.proxy)


def test_the_watching_thread_rolls_out_checkpoints_written_while_it_runs(tmp_path, toy, config):
    watcher = CheckpointRollouts(tmp_path, toy, config, poll_s=0.01)
    watcher.start()
    save(tmp_path, 1, network_with_prior(toy, config, -300.0))
    best = watcher.finish()
    assert best.step == 1 and len(watcher.history) == 1


def test_finish_says_when_no_checkpoint_placed_every_macro(tmp_path, toy, config):
    with pytest.raises(RuntimeError, match="no checkpoint's policy placed every macro"):
        CheckpointRollouts(tmp_path, toy, config).finish()
