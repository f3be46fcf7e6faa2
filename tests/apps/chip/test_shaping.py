"""The dense-reward option, the per-cell cost maps in the observation and the policy's greedy prior."""

import numpy as np
import pytest
import torch

from menger.apps.chip import load_problem
from menger.apps.chip.baselines import candidate_costs, greedy_placement
from menger.apps.chip.candidates import normalised_over_legal
from menger.apps.chip.env import GRID_MAPS, ChipPlacementEnv
from menger.apps.chip.policy import ChipPolicyNet


@pytest.fixture(scope="module")
def tiles():
    return load_problem("macro_tiles_10x10")


def play(env, choose):
    """Run one episode with `choose(obs) -> action`; returns the rewards and the final info."""
    obs, _ = env.reset(seed=0)
    rewards = []
    while True:
        obs, reward, terminated, _, info = env.step(choose(obs))
        rewards.append(reward)
        if terminated:
            return rewards, info


def test_normalised_over_legal_scales_legal_cells_and_marks_illegal_ones():
    legal = np.array([True, False, True, True])
    np.testing.assert_allclose(normalised_over_legal(np.array([3.0, -9.0, 5.0, 4.0]), legal), [0, 1, 1, 0.5])
    np.testing.assert_allclose(normalised_over_legal(np.array([2.0, 0.0, 2.0, 2.0]), legal), [0, 1, 0, 0])


def test_dense_reward_telescopes_to_the_sparse_return(tiles):
    rng = np.random.default_rng(3)
    actions = []

    def random_then_replay(obs):
        if len(actions) < len(tiles.movable):
            actions.append(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        return actions[-1]

    sparse, _ = play(ChipPlacementEnv(problem=tiles), random_then_replay)
    replay = iter(actions)
    dense, info = play(ChipPlacementEnv(problem=tiles, dense_reward=True), lambda obs: next(replay))
    assert all(r == 0.0 for r in sparse[:-1])
    assert sum(r != 0.0 for r in dense[:-1]) > len(dense) // 2, "dense rewards should pay along the way"
    assert sum(dense) == pytest.approx(sparse[-1], abs=1e-9)
    assert sparse[-1] == pytest.approx(-(info["proxy_cost"]["wirelength"] + 0.5 * info["proxy_cost"]["congestion"]
                                         + info["proxy_cost"]["density"]))


def test_cost_maps_rank_cells_as_the_greedy_placer_does(tiles):
    env = ChipPlacementEnv(problem=tiles)
    obs, _ = env.reset(seed=0)
    for _ in range(7):
        obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    maps = obs["grid_maps"].reshape(len(GRID_MAPS), -1)
    legal = obs["action_mask"].astype(bool)
    assert maps.min() >= 0 and maps.max() <= 1
    greedy_map = maps[GRID_MAPS.index("greedy_cost")]
    assert (greedy_map[~legal] == 1).all() and greedy_map[legal].min() == 0
    cells = np.flatnonzero(legal)
    exact = candidate_costs(env.cost, env.current_macro, cells)
    scaled = (exact - exact.min()) / (exact.max() - exact.min())
    np.testing.assert_allclose(greedy_map[cells], scaled, atol=1e-6)


def test_untrained_policy_with_cost_prior_places_like_greedy(tiles):
    env = ChipPlacementEnv(problem=tiles)
    net = ChipPolicyNet(env.observation_space, env.action_space, channels=8, layers=2, cost_prior=20.0)

    def argmax_policy(obs):
        batch = {key: torch.as_tensor(value[None], dtype=torch.float32) for key, value in obs.items()}
        logits = net(batch)[0][0].detach().numpy()
        return int(np.argmax(np.where(obs["action_mask"] == 1, logits, -np.inf)))

    play(env, argmax_policy)
    greedy = greedy_placement(tiles)
    placed = env.cost.layout
    np.testing.assert_allclose(placed.x[tiles.movable], greedy.x[tiles.movable])
    np.testing.assert_allclose(placed.y[tiles.movable], greedy.y[tiles.movable])


def test_policy_without_cost_prior_starts_uniform(tiles):
    env = ChipPlacementEnv(problem=tiles)
    net = ChipPolicyNet(env.observation_space, env.action_space, channels=8, layers=2)
    obs, _ = env.reset(seed=0)
    batch = {key: torch.as_tensor(value[None], dtype=torch.float32) for key, value in obs.items()}
    assert torch.count_nonzero(net(batch)[0]) == 0
