"""The env-stepping ceiling: random-action steps/s of raw envs, and of the same envs through Menger's VecEnv.

No learner can go faster than its envs step, so this is the ceiling every throughput figure is read
against; the wrapped/raw ratio is the cost of Menger's env layer (autoreset bookkeeping, NaN scan).

    python benchmarks/env_ceiling.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np

from menger.envs import make_vec_env
from menger.envs.atari import make_atari_vector_env
from menger.envs.make import resolve_env

ACTION_BANK_SIZE = 256  # actions are drawn before timing so sampling cost stays out of the figure


def measure_env_ceiling(env_id: str, num_envs: int, seconds: float, preset: str | None = None,
                        wrapped: bool = True, num_threads: int = 1) -> float:
    """Env steps per second (steps of each of the B envs counted) with random actions, for ``seconds``.

    ``wrapped=False`` times the env without Menger: the env's own vector env, or B single envs stepped
    in a plain loop with reset on episode end, whichever ``make_vec_env`` would wrap.
    """
    step, action_space, close = (_wrapped_stepper if wrapped else _raw_stepper)(env_id, num_envs, preset, num_threads)
    action_space.seed(0)
    actions = [np.stack([action_space.sample() for _ in range(num_envs)]) for _ in range(ACTION_BANK_SIZE)]
    try:
        for batch in actions[:8]:  # warm-up: first steps pay for lazy allocation and checks
            step(batch)
        calls = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for batch in actions[:32]:
                step(batch)
            calls += 32
        elapsed = time.perf_counter() - started
    finally:
        close()
    return calls * num_envs / elapsed


def _wrapped_stepper(env_id, num_envs, preset, num_threads):
    env = make_vec_env(env_id, num_envs, seed=0, preset=preset, num_threads=num_threads)
    env.reset()
    return env.step, env.single_action_space, env.close


def _raw_stepper(env_id, num_envs, preset, num_threads):
    if preset == "atari":
        return _raw_vector_stepper(make_atari_vector_env(env_id, num_envs, num_threads=num_threads, kwargs={}))
    is_vector, factory = resolve_env(env_id)
    if is_vector:
        return _raw_vector_stepper(factory(num_envs=num_envs))
    return _raw_loop_stepper([factory() for _ in range(num_envs)])


def _raw_vector_stepper(env: gymnasium.vector.VectorEnv):
    env.reset(seed=0)
    return env.step, env.single_action_space, env.close


def _raw_loop_stepper(envs: list[gymnasium.Env]):
    for index, env in enumerate(envs):
        env.reset(seed=index)

    def step(actions):
        for env, action in zip(envs, actions):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()

    def close():
        for env in envs:
            env.close()

    return step, envs[0].action_space, close


CASES = (
    ("CartPole-v1, 1 env in a loop", "CartPole-v1", 1, None),
    ("CartPole-v1, vector B=64", "CartPole-v1", 64, None),
    ("ALE Pong, AtariVectorEnv B=8, 2 threads", "ALE/Pong-v5", 8, "atari"),
)


def _single_env_loop_id(env_id: str, num_envs: int) -> str:
    """CartPole has a vector env; its 'single env in a loop' case uses the single-env class as a user env."""
    if num_envs == 1 and env_id == "CartPole-v1":
        return "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    return env_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="raw and wrapped alternate; the best round counts")
    args = parser.parse_args()
    print(f"{'case':44s} {'raw steps/s':>14s} {'menger steps/s':>15s} {'ratio':>7s}")
    for label, env_id, num_envs, preset in CASES:
        env_id = _single_env_loop_id(env_id, num_envs)
        threads = 2 if preset == "atari" else 1
        raw, menger = 0.0, 0.0
        for _ in range(args.rounds):  # alternating rounds keep a busy machine from favouring either side
            raw = max(raw, measure_env_ceiling(env_id, num_envs, args.seconds, preset, False, threads))
            menger = max(menger, measure_env_ceiling(env_id, num_envs, args.seconds, preset, True, threads))
        print(f"{label:44s} {raw:14,.0f} {menger:15,.0f} {menger / raw:7.2f}")


if __name__ == "__main__":
    main()
