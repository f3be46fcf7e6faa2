"""The wargame: PettingZoo's own API tests, the rules one by one on small scenarios, determinism, the
vectorised core against single games, and the bot ladder."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from menger.config import ConfigError
from menger.envs.wargame import (BLUE, DRAW, RED, UnitType, WargameBatch, env, make_bot, make_config,
                                 parallel_env, play)

# 3 rows x 5 columns, a wall in the middle; one capture point at the top middle
SMALL = """\
r.C.b
r.#.b
r...b"""
SNIPER = UnitType("sniper", hp=8, attack_range=4.0, damage=3, cooldown=2)
TANK = UnitType("tank", hp=24, attack_range=1.5, damage=4, cooldown=2)


def small_game(team=("sniper",), **kwargs) -> WargameBatch:
    config = make_config(layout=SMALL, team=team, unit_types=(SNIPER, TANK), capture_radius=0, **kwargs)
    return WargameBatch(config, num_games=1)


def cell(row: int, col: int, width: int = 5) -> int:
    return row * width + col


def random_actions(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    return (rng.random(masks.shape) * masks).argmax(-1)


# --- PettingZoo's API -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [{}, {"layout": None, "size": (10, 14), "map_seed": 3, "diagonal_moves": True,
                                         "fog_of_war": False, "team": ["tank", "sniper", "infantry"],
                                         "rotate_blue": True, "team_spirit": 0.5},
                                    {"observe_planes": False, "relative_positions": True, "rotate_blue": True}])
def test_pettingzoo_api_tests_pass(config):
    parallel_api_test(parallel_env(**config), num_cycles=200)
    api_test(env(**config), num_cycles=200)


def test_pettingzoo_seed_tests_pass():
    seed_test(env, num_cycles=60)
    parallel_seed_test(parallel_env, num_cycles=60)


def test_agents_spaces_state_and_picture():
    game = parallel_env(render_mode="rgb_array")
    observations, infos = game.reset(seed=1)
    assert game.agents == [f"red_{i}" for i in range(5)] + [f"blue_{i}" for i in range(5)]
    assert game.observation_space("red_0") is game.observation_space("red_0")
    for agent, observation in observations.items():
        assert game.observation_space(agent).contains(observation)
    assert game.state_space.contains(game.state())
    picture = game.render()
    assert picture.dtype == np.uint8 and picture.shape == (12 * 24, 12 * 24, 3)


def test_dead_agents_leave_for_good_and_the_survivors_learn_the_outcome():
    game = parallel_env()
    rng = np.random.default_rng(0)
    observations, _ = game.reset(seed=3)
    gone: set[str] = set()
    while game.agents:
        actions = {agent: int(random_actions(rng, observations[agent]["action_mask"][None])[0])
                   for agent in game.agents}
        present = list(game.agents)
        observations, rewards, terminations, truncations, infos = game.step(actions)
        assert set(rewards) == set(terminations) == set(infos) == set(present)
        assert not gone & set(game.agents)
        for agent in present:
            if infos[agent].get("killed"):
                assert terminations[agent] and agent not in game.agents
        gone |= set(present) - set(game.agents)
    winner = infos[present[0]]["winner"]
    for agent in present:
        team = agent.split("_")[0]
        assert infos[agent]["outcome"] == (0 if winner == "draw" else 1 if winner == team else -1)


# --- the rules ------------------------------------------------------------------------------------------------

def test_walls_block_moves_and_line_of_sight():
    game = small_game()
    layout = game.layout
    out = game.set_units(0, [cell(1, 1), cell(1, 3)])          # the wall at (1, 2) stands between them
    east = 1 + 1  # moves are N E S W after the no-op
    assert out.obs["action_mask"][0, 0, east] == 0
    assert out.obs["action_mask"][0, 0, layout.attack_action(0)] == 0
    assert out.obs["observation"][0, 0, layout.plane_size + len(layout.self_names) + len(layout.ally_names)] == 0
    enemies = layout.split(out.obs["observation"][0, 0])["enemies"]
    assert enemies[0, 0] == 0                                  # fog of war: blue is hidden behind the wall
    before = game.position.copy()
    game.step(np.array([[east, 0]]))                            # a forbidden move is a no-op
    assert (game.position == before).all()
    out = game.set_units(0, [cell(0, 1), cell(0, 3)])          # the top row is open
    assert out.obs["action_mask"][0, 0, layout.attack_action(0)] == 1
    assert layout.split(out.obs["observation"][0, 0])["enemies"][0, 0] == 1


def test_each_team_sees_the_map_from_its_own_side():
    game = small_game(team=("sniper", "tank"))
    out = game.set_units(0, [cell(0, 0), cell(2, 0), cell(0, 4), cell(2, 4)])
    blue = game.layout.split(out.obs["observation"][0, 2])
    names = game.layout.plane_names
    planes = {name: blue["planes"][names.index(name)].ravel() for name in names}
    assert np.flatnonzero(planes["self"]).tolist() == [cell(0, 4)]
    assert np.flatnonzero(planes["ally_hp"]).tolist() == [cell(0, 4), cell(2, 4)]
    assert np.flatnonzero(planes["ally_tank"]).tolist() == [cell(2, 4)]
    assert np.flatnonzero(planes["enemy_hp"]).tolist() == [cell(0, 0), cell(2, 0)]
    assert blue["self"][game.layout.self_names.index("team")] == 1
    assert game.state().shape == (1, game.state_size)


def test_unit_features_can_stand_alone_and_give_offsets_from_the_observer():
    game = small_game(team=("sniper", "tank"), observe_planes=False, relative_positions=True)
    layout = game.layout
    assert layout.plane_size == 0 and layout.size == (len(layout.self_names) + 2 * 2 * len(layout.ally_names)
                                                      + 1 * len(layout.point_names))   # one capture point
    out = game.set_units(0, [cell(0, 0), cell(2, 1), cell(0, 4), cell(2, 4)])
    red = layout.split(out.obs["observation"][0, 0])                 # the sniper at (0, 0); rows / 2, cols / 4
    ally, enemy = dict(zip(layout.ally_names, red["allies"][1])), dict(zip(layout.enemy_names, red["enemies"][0]))
    diagonal = np.hypot(2, 4)
    assert (ally["d_row"], ally["d_col"]) == (1.0, 0.25)
    assert ally["distance"] == pytest.approx(np.hypot(2, 1) / diagonal)
    assert (enemy["d_row"], enemy["d_col"]) == (0.0, 1.0) and enemy["distance"] == pytest.approx(4 / diagonal)
    assert red["allies"][0][list(layout.ally_names).index("distance")] == 0.0          # itself
    blue = layout.split(out.obs["observation"][0, 2])                # the blue sniper at (0, 4) sees the red tank
    tank = dict(zip(layout.enemy_names, blue["enemies"][1]))
    assert (tank["d_row"], tank["d_col"]) == (1.0, -0.75)
    # the capture point at (0, 2), which the planes showed: no one holds it, where it is, how far
    point = dict(zip(layout.point_names, red["points"][0]))
    assert point == pytest.approx({"held": 0.0, "row": 0.0, "col": 0.5, "d_row": 0.0, "d_col": 0.5,
                                   "distance": 2 / diagonal})
    assert dict(zip(layout.point_names, blue["points"][0]))["d_col"] == -0.5
    out = game.set_units(0, [cell(0, 2), cell(2, 1), cell(0, 4), cell(2, 4)])     # the red sniper takes it
    held = layout.split(out.obs["observation"][0])["points"][:, 0, 0]           # each agent's "held"
    assert held.tolist() == [1.0, 1.0, -1.0, -1.0]


def test_without_planes_the_global_state_keeps_the_units_and_says_who_holds_each_point():
    """The critic's state drops the planes with the observation's, and keeps all they showed on the fixed map."""
    full, compact = (small_game(team=("sniper", "tank"), observe_planes=planes) for planes in (True, False))
    units = [cell(0, 2), cell(2, 1), cell(0, 4), cell(2, 4)]                   # the red sniper holds the point
    for game in (full, compact):
        game.set_units(0, units, hp=[8, 20, 5, 24])
    planes = full.state()[0, :-(4 * (5 + 2) + 3)]
    assert compact.state_size == 1 + 4 * (5 + 2) + 3 and compact.state().shape == (1, compact.state_size)
    assert np.array_equal(compact.state()[0, :-4], full.state()[0, len(planes):-3])   # a row per unit
    assert compact.state()[0, -4] == 1.0                                        # red holds the one point
    assert np.array_equal(compact.state()[0, -3:], full.state()[0, -3:])       # the time and the scores
    assert parallel_env(observe_planes=False).state_space.shape == (10 * (5 + 3) + 2 + 3,)


@pytest.mark.parametrize("options", [{}, {"observe_planes": False}, {"relative_positions": True},
                                     {"rotate_blue": True, "observe_planes": False, "relative_positions": True}])
def test_the_bots_play_the_same_games_whatever_the_observation_holds(options):
    """The bots read units from their features and the map from the planes, or from the config without them."""
    assert play("focus-fire", "attack-nearest", games=40, seed=0, config=make_config(**options)) == \
        play("focus-fire", "attack-nearest", games=40, seed=0, config=make_config(rotate_blue=True)
             if options.get("rotate_blue") else None)


@pytest.mark.parametrize("options", [{"diagonal_moves": False}, {"diagonal_moves": True},
                                     {"observe_planes": False, "relative_positions": True},
                                     {"relative_positions": True, "diagonal_moves": True}])
def test_rotated_blue_plays_the_mirrored_game_exactly_as_red(options):
    """rotate_blue on a point-symmetric map: game 1 is game 0 turned half a turn with the teams swapped, so blue
    in game 1 must see, may do and gets what red does in game 0, step after step, under the same actions."""
    game = WargameBatch(make_config(rotate_blue=True, **options), num_games=2)
    n, cells = game.num_units, game.map.cells
    game.reset(seed=3)
    mirrored = np.concatenate([cells - 1 - game.position[0, n:], cells - 1 - game.position[0, :n]])
    out = game.set_units(1, mirrored.tolist())
    out = game.set_units(0, game.position[0].tolist())         # both games' clocks start together
    team = game.layout.plane_size + game.layout.self_names.index("team")
    rng = np.random.default_rng(0)
    swap = np.r_[n:2 * n, 0:n]
    for _ in range(40):
        obs, mask = out.obs["observation"].copy(), out.obs["action_mask"]
        obs[..., team] = 0
        assert np.array_equal(obs[0], obs[1][swap]) and np.array_equal(mask[0], mask[1][swap])
        if out.done.any():
            break
        actions = np.array([[rng.choice(np.flatnonzero(m)) for m in mask[0]]])
        out = game.step(np.concatenate([actions, actions[:, swap]]))
        assert np.array_equal(out.reward[0], out.reward[1][swap])
        assert np.array_equal(out.outcome[0], out.outcome[1][swap])
    assert game.steps[0] > 10                                  # the games went on long enough to mean something


def test_bots_read_the_rotated_view_of_blue():
    rotated = make_config(rotate_blue=True)
    red_wins, _, blue_wins = play("random", "attack-nearest", games=40, seed=0, config=rotated)
    assert blue_wins >= 38, (red_wins, blue_wins)
    red_wins, _, blue_wins = play("attack-nearest", "focus-fire", games=200, seed=0, config=rotated)
    assert blue_wins > 1.3 * red_wins, (red_wins, blue_wins)  # 248 to 119 over 400 games, rotated or not


def test_generated_maps_are_point_symmetric_connected_and_seeded():
    first = make_config(layout=None, size=(10, 13), map_seed=5).map
    again = make_config(layout=None, size=(10, 13), map_seed=5).map
    other = make_config(layout=None, size=(10, 13), map_seed=6).map
    assert np.array_equal(first.walls, first.walls[::-1, ::-1]) and np.array_equal(first.walls, again.walls)
    assert not np.array_equal(first.walls, other.walls)
    floor = np.flatnonzero(~first.walls.ravel())
    assert np.isfinite(first.path_length[np.ix_(floor, floor)]).all()
    assert np.array_equal(first.line_of_sight, first.line_of_sight.T)
    assert len(first.capture_cells) == 2


def test_attacks_deal_damage_kill_and_wait_for_the_cooldown():
    game = small_game(reward_damage=0.1, reward_kill=1.0)
    attack = game.layout.attack_action(0)
    game.set_units(0, [cell(0, 0), cell(0, 4)], hp=[8, 5])
    out = game.step(np.array([[attack, 0]]))
    assert game.hp[0].tolist() == [8, 2]
    assert out.reward[0, 0] == pytest.approx(0.1 * 3)
    assert out.obs["action_mask"][0, 0, attack] == 0            # cooldown 2: not the next step ...
    out = game.step(np.array([[attack, 0]]))                    # (masked: a no-op)
    assert game.hp[0].tolist() == [8, 2]
    assert out.obs["action_mask"][0, 0, attack] == 1            # ... but the one after
    out = game.step(np.array([[attack, 0]]))
    assert not out.alive[0, 1] and out.done[0] and out.terminated[0]
    assert out.winner[0] == RED and out.outcome[0].tolist() == [1, -1]
    assert out.reward[0, 0] == pytest.approx(0.1 * 2 + 1.0 + 1.0)  # 2 hp left to take, the kill, the win
    assert (out.obs["observation"][0, 1] == 0).all() and out.obs["action_mask"][0, 1].tolist()[0] == 1


@pytest.mark.parametrize("spirit", [0.0, 0.5, 1.0])
def test_team_spirit_moves_each_units_reward_towards_its_teams_mean(spirit):
    game = small_game(team=("sniper", "sniper"), reward_damage=0.1, team_spirit=spirit)
    attack = game.layout.attack_action(0)
    game.set_units(0, [cell(0, 0), cell(2, 0), cell(0, 4), cell(2, 4)])
    out = game.step(np.array([[attack, 0, 0, 0]]))             # red 0 hits blue 0 for 3; nobody else acts
    own, mean = 0.1 * 3, 0.1 * 3 / 2
    assert out.reward[0, :2] == pytest.approx([(1 - spirit) * own + spirit * mean, spirit * mean])
    assert out.reward[0, 2:].tolist() == [0.0, 0.0]            # blue's units are shared among blue alone


def test_units_that_kill_each_other_at_once_draw():
    game = small_game()
    attack = game.layout.attack_action(0)
    game.set_units(0, [cell(0, 0), cell(0, 4)], hp=[3, 3])
    out = game.step(np.array([[attack, attack]]))
    assert not out.alive[0].any() and out.winner[0] == DRAW and out.outcome[0].tolist() == [0, 0]


def test_two_units_moving_into_one_cell_both_stay():
    game = small_game(team=("tank", "tank"))
    start = [cell(0, 1), cell(2, 1), cell(0, 4), cell(2, 4)]    # red's two tanks around the free cell (1, 1)
    game.set_units(0, start)
    south, north = 1 + 2, 1 + 0
    game.step(np.array([[south, north, 0, 0]]))
    assert game.position[0].tolist() == start
    game.step(np.array([[south, 0, 0, 0]]))
    assert game.position[0, 0] == cell(1, 1)


def test_a_lone_unit_on_a_capture_point_scores_and_wins():
    game = small_game(capture_score_to_win=3, reward_capture=0.5, reward_win=1.0)
    game.set_units(0, [cell(0, 2), cell(2, 4)])
    out = game.step(np.zeros((1, 2), dtype=np.int64))
    assert game.score[0].tolist() == [1, 0] and out.reward[0].tolist() == [0.5, 0.0]
    game.step(np.zeros((1, 2), dtype=np.int64))
    out = game.step(np.zeros((1, 2), dtype=np.int64))
    assert out.done[0] and out.terminated[0] and out.winner[0] == RED
    assert out.reward[0].tolist() == [1.5, -1.0]


def test_the_time_limit_truncates_and_judges_by_score_then_hit_points():
    game = small_game(max_steps=2, capture_score_to_win=10)
    game.set_units(0, [cell(2, 0), cell(2, 4)], hp=[8, 7])     # nobody on the point, blue hurt
    game.step(np.zeros((1, 2), dtype=np.int64))
    out = game.step(np.zeros((1, 2), dtype=np.int64))
    assert out.done[0] and out.truncated[0] and not out.terminated[0] and out.winner[0] == RED
    game.set_units(0, [cell(2, 0), cell(0, 2)], hp=[8, 7])     # blue holds the point
    game.step(np.zeros((1, 2), dtype=np.int64))
    out = game.step(np.zeros((1, 2), dtype=np.int64))
    assert out.winner[0] == BLUE


def test_finished_games_stay_finished_until_reset():
    game = small_game()
    attack = game.layout.attack_action(0)
    game.set_units(0, [cell(0, 0), cell(0, 4)], hp=[8, 1])
    game.step(np.array([[attack, 0]]))
    out = game.step(np.array([[1, 1]]))
    assert out.done[0] and (out.reward == 0).all() and game.steps[0] == 1
    out = game.reset(seed=0, games=out.done)
    assert not out.done[0] and out.alive[0].all()


def test_masks_allow_only_what_works_and_out_of_range_actions_are_refused():
    game = WargameBatch(make_config(), num_games=8)
    rng = np.random.default_rng(0)
    out = game.reset(seed=0)
    for _ in range(30):
        masks = out.obs["action_mask"]
        assert (masks[..., 0] == 1).all()
        actions = random_actions(rng, masks)
        out = game.step(actions)
    with pytest.raises(ValueError, match="num_agents"):
        game.step(np.zeros((8, 3), dtype=np.int64))


# --- determinism and the vectorised core ----------------------------------------------------------------------

def rollout(batch: WargameBatch, seed, steps: int = 40, action_seed: int = 0):
    rng = np.random.default_rng(action_seed)
    out = batch.reset(seed=seed)
    trace = [out.obs["observation"].copy()]
    for _ in range(steps):
        out = batch.step(random_actions(rng, out.obs["action_mask"]))
        trace += [out.obs["observation"].copy(), out.reward.copy(), out.winner.copy()]
    return trace


def test_the_same_seed_plays_the_same_game():
    config = make_config()
    first, second = rollout(WargameBatch(config, 4), 7), rollout(WargameBatch(config, 4), 7)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    other = rollout(WargameBatch(config, 4), 8)
    assert not np.array_equal(first[0], other[0])


def test_a_batch_plays_as_its_games_one_by_one():
    config = make_config()
    games, steps = 4, 60
    batch = WargameBatch(config, games)
    singles = [WargameBatch(config, 1) for _ in range(games)]
    rng = np.random.default_rng(1)
    out = batch.reset(seed=10)
    single_outs = [single.reset(seed=10 + g) for g, single in enumerate(singles)]
    for _ in range(steps):
        for g, single_out in enumerate(single_outs):
            assert np.array_equal(out.obs["observation"][g], single_out.obs["observation"][0])
        actions = random_actions(rng, out.obs["action_mask"])
        out = batch.step(actions)
        single_outs = [single.step(actions[g:g + 1]) for g, single in enumerate(singles)]
        for g, single_out in enumerate(single_outs):
            assert np.array_equal(out.reward[g], single_out.reward[0])
            assert out.winner[g] == single_out.winner[0]
    assert np.array_equal(batch.state()[0], singles[0].state()[0])


# --- configuration and bots -----------------------------------------------------------------------------------

def test_bad_configs_say_what_to_fix():
    with pytest.raises(ConfigError, match="did you mean 'max_steps'"):
        make_config(max_step=10)
    with pytest.raises(ConfigError, match="unit type 'archer'"):
        make_config(team=("archer",))
    with pytest.raises(ConfigError, match="spawn cells"):
        make_config(layout=SMALL, team=("sniper",) * 4, unit_types=(SNIPER,))


def test_a_bot_acts_on_one_agents_pettingzoo_observation():
    game = parallel_env()
    observations, _ = game.reset(seed=0)
    for name in ("random", "attack-nearest", "focus-fire"):
        bot = make_bot(name, seed=0)
        for agent in game.agents:
            action = bot.act(observations[agent]["observation"], observations[agent]["action_mask"])
            assert observations[agent]["action_mask"][action] == 1
    with pytest.raises(ValueError, match="unknown wargame bot"):
        make_bot("alpha-zero")


def ladder(stronger: str, weaker: str, games: int = 50) -> tuple[int, int, int]:
    """(wins, draws, losses) of ``stronger`` over 2 x ``games``, playing each side once."""
    as_red = play(stronger, weaker, games=games, seed=0)
    as_blue = play(weaker, stronger, games=games, seed=1000)
    return as_red[0] + as_blue[2], as_red[1] + as_blue[1], as_red[2] + as_blue[0]


def test_the_bot_ladder_is_real():
    wins, draws, losses = ladder("attack-nearest", "random")
    assert wins >= 90, (wins, draws, losses)
    wins, draws, losses = ladder("focus-fire", "attack-nearest")
    assert wins >= 55 and wins >= 1.5 * losses and draws <= 20, (wins, draws, losses)


def test_the_speed_benchmark_runs(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "wargame_env.py"
    spec = importlib.util.spec_from_file_location("wargame_env_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--seconds", "0.05", "--repeats", "1", "--games", "2"])
    printed = capsys.readouterr().out
    assert "WargameBatch, G=2" in printed and "PettingZoo ParallelEnv" in printed and "load average" in printed
