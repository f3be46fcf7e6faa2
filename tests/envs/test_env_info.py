"""env.info_keys at the VecEnv: the listed keys of each ended episode's last info, in every autoreset mode."""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from menger.envs import EnvError, FaultPolicy, LoopVecEnv, NativeVecEnv
from menger.envs.info import info_value, vector_info

LENGTH = 3  # steps per episode


class ReportingEnv(gymnasium.Env):
    """Episodes of LENGTH steps; the last step's info says `is_success` on every other episode (the first one
    succeeds), `score` (an int) always, `bonus` only on successes, and `note` (not a number) only if asked."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, note: bool = False, nan_score: bool = False):
        self.note, self.nan_score = note, nan_score
        self.steps, self.episodes = 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(2, np.float32), {"is_success": "a reset's info is never read"}

    def step(self, action):
        self.steps += 1
        info = {}
        if self.steps == LENGTH:
            success = self.episodes % 2 == 0
            info = {"is_success": np.bool_(success), "score": self.episodes,
                    **({"bonus": 1.0} if success else {}), **({"note": "done"} if self.note else {})}
            if self.nan_score:
                info["score"] = float("nan")
            self.episodes += 1
        return np.zeros(2, np.float32), 1.0, self.steps == LENGTH, False, info


def run_episodes(env, episodes: int) -> list[dict]:
    """What the ended rows of env 0 reported, over `episodes` of its episodes."""
    env.reset(seed=0)
    seen = []
    while len(seen) < episodes:
        result = env.step(np.zeros(env.num_envs, np.int64))
        ended = np.flatnonzero(result.terminated | result.truncated)
        assert sorted(result.episode_info) == ended.tolist()  # one entry per ended row, and only those
        if 0 in result.episode_info:
            seen.append(result.episode_info[0])
    env.close()
    return seen


EXPECTED = [{"is_success": 1.0, "score": 0.0, "bonus": 1.0}, {"is_success": 0.0, "score": 1.0},
            {"is_success": 1.0, "score": 2.0, "bonus": 1.0}, {"is_success": 0.0, "score": 3.0}]


@pytest.mark.parametrize("next_step", [False, True], ids=["same_step", "next_step"])
def test_a_loop_env_reports_the_listed_keys_of_each_episode_end(next_step):
    env = LoopVecEnv(ReportingEnv, 2, env_id="reporting", seed=0, faults=FaultPolicy(),
                     next_step_autoreset=next_step, info_keys=("is_success", "score", "bonus", "absent"))
    assert run_episodes(env, 4) == EXPECTED


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_a_native_vector_env_reports_them_in_every_autoreset_mode(mode):
    """NEXT_STEP and DISABLED put the last info in the step's infos, SAME_STEP in infos['final_info']."""
    make = lambda: SyncVectorEnv([ReportingEnv, ReportingEnv], autoreset_mode=mode)  # noqa: E731
    env = NativeVecEnv(make, env_id="reporting", seed=0, faults=FaultPolicy(),
                       info_keys=("is_success", "score", "bonus", "absent"))
    assert env.autoreset_mode == mode
    assert run_episodes(env, 4) == EXPECTED


def test_without_info_keys_no_info_is_read():
    env = LoopVecEnv(lambda: ReportingEnv(note=True), 2, env_id="reporting", seed=0, faults=FaultPolicy())
    env.reset(seed=0)
    results = [env.step(np.zeros(2, np.int64)) for _ in range(LENGTH)]
    assert results[-1].terminated.all() and all(result.episode_info is None for result in results)


def test_a_value_that_is_no_number_is_an_error_naming_the_key():
    env = LoopVecEnv(lambda: ReportingEnv(note=True), 1, env_id="reporting", seed=0, faults=FaultPolicy(),
                     info_keys=("note",))
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"reporting: env.info_keys lists 'note'.*'done' \(str\).*remove 'note'"):
        for _ in range(LENGTH):
            env.step(np.zeros(1, np.int64))


def test_nan_counts_as_not_reported():
    env = LoopVecEnv(lambda: ReportingEnv(nan_score=True), 1, env_id="reporting", seed=0, faults=FaultPolicy(),
                     info_keys=("score", "is_success"))
    assert run_episodes(env, 2) == [{"is_success": 1.0}, {"is_success": 0.0}]


def test_values_are_numbers_and_bools_as_floats():
    assert [info_value("e", "k", v) for v in (True, np.bool_(False), 3, np.int64(2), np.float32(0.5),
                                            np.array([1.5]), float("inf"))] == [1.0, 0.0, 3.0, 2.0, 0.5, 1.5, None]
    for bad in (None, "yes", [1, 2], np.zeros(2), {"a": 1}):
        with pytest.raises(EnvError, match="'k'"):
            info_value("e", "k", bad)


def test_vector_infos_respect_the_mask_of_the_envs_that_set_a_key():
    infos = {"is_success": np.array([True, False, False]), "_is_success": np.array([True, False, True])}
    assert vector_info("e", infos, ("is_success",), np.array([0, 1, 2])) == {
        0: {"is_success": 1.0}, 1: {}, 2: {"is_success": 0.0}}
    assert vector_info("e", {}, ("is_success",), np.array([1]), final=True) == {1: {}}
