import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import menger.apps.chip  # noqa: F401  (registers ChipPlacement-v0)
from menger.apps.chip.env import GRID_MAPS, NO_LEGAL_CELL_REWARD, ChipPlacementEnv

from .helpers import assert_legal, macro, plc_header, write_design


@pytest.mark.parametrize("kwargs", [{"netlist": "macro_tiles_10x10"}, {"netlist": "toy_macro_stdcell"},
                                    {"netlist": "simple_grouped_with_coords_with_blockage"},
                                    {"netlist": "macro_tiles_10x10", "grid_bound": 32}])
def test_check_env(kwargs):
    check_env(gym.make("ChipPlacement-v0", **kwargs).unwrapped, skip_render_check=True)


def rollout(env, seed=0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    masks = []
    while True:
        masks.append(obs["action_mask"].copy())
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            return reward, info, masks


@pytest.mark.parametrize("name", ["macro_tiles_10x10", "simple_grouped_with_coords_with_blockage", "ariane133_ng45"])
def test_masked_rollout_is_legal_and_reward_is_the_weighted_cost(name):
    env = ChipPlacementEnv(netlist=name, w_wirelength=1.0, w_congestion=0.25, w_density=2.0, soft_macro_steps=10)
    reward, info, masks = rollout(env)
    if "no_legal_cell" in info:
        pytest.skip("random rollout boxed itself in")
    assert len(masks) == len(env.problem.movable)
    assert_legal(env.problem, env.cost.layout)
    cost = info["proxy_cost"]
    assert reward == pytest.approx(-(cost["wirelength"] + 0.25 * cost["congestion"] + 2.0 * cost["density"]))


def test_blockage_and_canvas_edge_cells_are_masked(tmp_path):
    # 4x2 grid of 50 µm cells, blockage over x, y in [0, 50]. A (60x40) centred in column 0 or 3 leaves the
    # canvas; in cell 1 it spans x 45..105 and touches the blockage.
    text = macro("A", 60, 40, 100, 50) + macro("B", 40, 40, 100, 50)
    header = plc_header(4, 2, 200, 100, extra="# Blockage : 0 0 50 50 1.0\n")
    env = ChipPlacementEnv(netlist=str(write_design(tmp_path / "blocked", text, header)))
    obs, _ = env.reset()
    assert obs["action_mask"].tolist() == [0, 0, 1, 0, 0, 1, 1, 0]
    obs, *_ = env.step(2)  # A now spans x 95..155 in row 0; B (40x40) may touch it but not overlap it
    assert obs["action_mask"].tolist() == [0, 1, 0, 1, 1, 1, 1, 1]


def test_masked_action_raises_and_out_of_range_too():
    env = ChipPlacementEnv(netlist="macro_tiles_10x10")
    obs, _ = env.reset()
    first = int(np.flatnonzero(obs["action_mask"])[0])
    obs, *_ = env.step(first)
    assert obs["action_mask"][first] == 0
    with pytest.raises(ValueError, match="masked"):
        env.step(first)
    with pytest.raises(ValueError, match="outside"):
        env.step(env.action_space.n)


def test_grid_bound_pads_with_masked_cells():
    env = ChipPlacementEnv(netlist="macro_tiles_10x10", grid_bound=32)
    obs, _ = env.reset()
    mask = obs["action_mask"].reshape(32, 32)
    assert mask[20:, :].sum() == 0 and mask[:, 20:].sum() == 0 and mask[:20, :20].sum() > 0
    assert obs["grid_maps"].shape == (len(GRID_MAPS), 32, 32)
    with pytest.raises(ValueError, match="at least 20"):
        ChipPlacementEnv(netlist="macro_tiles_10x10", grid_bound=10)


def test_no_legal_cell_ends_with_minus_four(tmp_path):
    # Two 100x100 cells hold two 100x100 macros; the third has nowhere to go.
    text = macro("A", 100, 100, 50, 50) + macro("B", 100, 100, 150, 50) + macro("C", 100, 100, 50, 50)
    path = write_design(tmp_path / "full", text, plc_header(2, 1, 200, 100))
    env = ChipPlacementEnv(netlist=str(path))
    obs, _ = env.reset()
    obs, reward, terminated, *_ = env.step(0)
    assert (reward, terminated) == (0.0, False)
    obs, reward, terminated, _, info = env.step(1)
    assert (reward, terminated, info) == (NO_LEGAL_CELL_REWARD, True, {"no_legal_cell": True})


def test_action_space_sample_is_legal():
    env = ChipPlacementEnv(netlist="toy_macro_stdcell")
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    assert all(obs["action_mask"][env.action_space.sample()] == 1 for _ in range(50))
