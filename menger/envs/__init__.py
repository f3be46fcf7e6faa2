"""Menger's environment layer: any environment as a ``VecEnv`` of B envs stepped together.

    from menger.envs import make_vec_env
    env = make_vec_env("CartPole-v1", num_envs=64, seed=0)
    obs = env.reset()
    result = env.step(actions)   # StepResult(obs, reward, terminated, truncated, valid, episode_info)

See ``menger.envs.vector`` for the interface and its autoreset rules, ``menger.envs.faults`` for what
happens to broken envs, ``menger.envs.sanity`` for tiny envs that learn in seconds, and ``menger.envs.memory``
for tasks that need memory.
"""

from menger.envs.faults import EnvError, FaultPolicy, NonFiniteValueError, UnknownEnvError
from menger.envs.make import make_vec_env, resolve_env
from menger.envs.memory import MEMORY_ENV_IDS, register_memory_envs
from menger.envs.sanity import SANITY_ENV_IDS, register_sanity_envs
from menger.envs.vector import LoopVecEnv, NativeVecEnv, StepResult, VecEnv

register_sanity_envs()
register_memory_envs()

__all__ = [
    "EnvError",
    "FaultPolicy",
    "LoopVecEnv",
    "MEMORY_ENV_IDS",
    "NativeVecEnv",
    "NonFiniteValueError",
    "SANITY_ENV_IDS",
    "StepResult",
    "UnknownEnvError",
    "VecEnv",
    "make_vec_env",
    "resolve_env",
]
