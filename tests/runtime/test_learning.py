"""Learning tests: fixed seeds, the processes launcher, reward thresholds (the issue's targets)."""
import pytest

from menger import api

pytestmark = pytest.mark.slow


def _train(tmp_path, preset, quiet, *extra):
    return api.train(preset, overrides=[*quiet, "runtime.launcher=processes", "checkpoint.interval_s=0", *extra],
                     run_dir=str(tmp_path / preset))


def test_cartpole_ppo_sync_reaches_475(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-ppo", quiet, "runtime.seed=1")
    assert result.reached_target, result.final_metrics
    assert result.final_metrics["episode/return_mean"] >= 475
    assert result.final_metrics["learner/policy_lag_max"] == 0  # sync: every unroll acted with the newest params


def test_cartpole_impala_async_reaches_475(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-impala", quiet, "runtime.seed=1")
    assert result.reached_target, result.final_metrics
    assert result.final_metrics["episode/return_mean"] >= 475


def test_cartpole_a3c_async_parameter_server_reaches_475(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-a3c", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["episode/return_mean"] >= 475 and m["learner/policy_lag_max"] <= 4  # runtime.parameter_server.max_staleness


def test_cartpole_a3c_sync_parameter_server_reaches_475_on_threads(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-a3c", quiet, "runtime.seed=1", "runtime.launcher=threads",
                    "runtime.parameter_server.update=sync")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["episode/return_mean"] >= 475 and m["learner/policy_lag_max"] == 0 and m["learner/gradients"] == 2


def test_pendulum_ppo_reaches_minus_250(tmp_path, quiet):
    result = _train(tmp_path, "pendulum-ppo", quiet, "runtime.seed=1", "stop.target_return=-250")
    assert result.reached_target, result.final_metrics
    assert result.final_metrics["episode/return_mean"] >= -250


def test_cartpole_apex_reaches_a_deterministic_evaluation_of_475(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-apex", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 475 and m["eval/episodes"] == 10
    assert m["replay/samples_per_insert"] <= 16 * 1.1  # the rate limiter held the ratio


def test_cartpole_gorila_reaches_a_deterministic_evaluation_of_475(tmp_path, quiet):
    result = _train(tmp_path, "cartpole-gorila", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 475 and m["eval/episodes"] == 10
    assert m["learner/workers"] == 2 and m["learner/workers_lost"] == 0


def test_cartpole_without_velocities_r2d2_reaches_a_deterministic_evaluation_of_475(tmp_path, quiet):
    """Only memory solves it: the feed-forward apex preset stays near 45 on the same env (benchmarks/memory.py)."""
    result = _train(tmp_path, "cartpole-novel-r2d2", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 475 and m["eval/episodes"] == 10


def test_memory_r2d2_remembers_the_bit_in_every_evaluation_episode(tmp_path, quiet):
    result = _train(tmp_path, "memory-r2d2", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] == 1.0 and m["eval/episodes"] == 20  # a memoryless agent averages 0.5


def test_pendulum_sac_reaches_a_deterministic_evaluation_of_minus_250(tmp_path, quiet):
    result = _train(tmp_path, "pendulum-sac", quiet, "runtime.seed=1")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= -250 and m["eval/episodes"] == 10


CATCH_FROM_PIXELS = {
    "name": "catch-impala", "algo": "impala", "env": {"id": "menger/Catch-v0"},
    "model": {"encoder": "cnn_shallow", "hidden": [256]},
    "vtrace": {"lr": 6e-4, "entropy_coef": 0.01},
    "runtime": {"actors": 1, "envs_per_actor": 16, "unroll_length": 20},
    "stop": {"target_return": 0.8, "env_frames": 400_000},
}


def test_catch_from_pixels_impala_async_learns(tmp_path, quiet):
    """The Atari path in small: uint8 frames, the CNN encoder, next-step autoreset, credit 9 steps back."""
    result = api.train(CATCH_FROM_PIXELS, overrides=[*quiet, "runtime.launcher=processes", "checkpoint.interval_s=0",
                                                     "runtime.seed=1"], run_dir=str(tmp_path / "catch"))
    assert result.reached_target, result.final_metrics  # random play earns about -0.6
    assert result.final_metrics["episode/return_mean"] >= 0.8


# ----- the generic presets on an env their defaults were not set on ------------------------------------------
def test_the_generic_r2d2_preset_remembers_the_bit_of_the_memory_task(tmp_path, quiet):
    """r2d2's generic preset trains on masked-velocity CartPole by default; here it meets the memory task with its
    defaults untouched (a memoryless agent averages 0.5)."""
    result = _train(tmp_path, "r2d2", quiet, "runtime.seed=1", "env.id=menger/Memory-v0", "env.kwargs={length: 10}",
                    "stop.target_return=0.95", "stop.env_frames=200000", "eval.interval_s=2", "eval.episodes=20")
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 0.95


def test_the_generic_selfplay_preset_beats_a_random_player_at_tic_tac_toe(tmp_path, quiet):
    """selfplay's generic preset defaults to Connect Four; here it meets Tic-Tac-Toe with its defaults untouched and
    is judged against the random player (over both seats; a random policy would score 0.5). Without the random
    quarter of its opponents and generic PPO's 10 x 32 passes, it scored 0.49 to 0.79 at 300k frames."""
    from menger.commands.match import env_factory, make_opponent, play_match

    game = "pettingzoo.classic.tictactoe_v3:env"
    run = tmp_path / "selfplay"
    api.train("selfplay", overrides=[*quiet, "runtime.seed=1", f"env.id={game}", "env.multiagent.learn=[player_1]",
                                     "stop.env_frames=60000", "checkpoint.interval_s=0"], run_dir=str(run))
    result = play_match(env_factory(game), api.run_player(run), make_opponent("random", game, seed=1), games=200,
                        seed=100000)
    assert result.score >= 0.8, result


def test_the_generic_marl_preset_beats_a_random_player_at_tic_tac_toe(tmp_path, quiet):
    """marl's generic preset defaults to the wargame; here it learns one Tic-Tac-Toe seat at a time against the random
    player, seats swapped. 0.955 and 0.96 at 60k frames on seed 1 here (0.89, 0.91 on seeds 2-3); 0.76 with PPO's
    4 x 4 passes of before."""
    from menger.commands.match import env_factory, make_opponent, play_match

    game = "pettingzoo.classic.tictactoe_v3:env"
    run = tmp_path / "marl"
    api.train("marl", overrides=[*quiet, "runtime.seed=1", f"env.id={game}", "env.multiagent.learn=[player_1]",
                                 "env.multiagent.swap_seats=true", "stop.env_frames=60000", "checkpoint.interval_s=0"],
              run_dir=str(run))
    result = play_match(env_factory(game), api.run_player(run), make_opponent("random", game, seed=1), games=200,
                        seed=100000)
    assert result.score >= 0.85, result
