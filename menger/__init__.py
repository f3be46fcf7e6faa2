"""Menger: distributed deep reinforcement learning in the actor-learner style.

The Python API (docs/guides/python-api.md)::

    import menger

    result = menger.train("cartpole-ppo", env=MyEnv, network=MyNet, seed=1)   # objects of your script, or names
    policy = menger.load_policy(result.run_dir, env=MyEnv, network=MyNet)
    actions = policy.act(observations)

The names below load on first use: `import menger` imports nothing but the standard library, so the command
line starts at once and every actor process imports this package cheaply.
"""
from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a few milliseconds at every start)

__version__ = "0.2.0"  # the one place the version is written: pyproject.toml reads it

# name -> the module that defines it; imported when the name is first asked for (`__getattr__`)
_PUBLIC = {
    "train": "menger.api",
    "resume": "menger.api",
    "load_policy": "menger.api",
    "load_run_config": "menger.api",
    "Policy": "menger.api",
    "UntrustedRunError": "menger.api",
    "ScriptObjectError": "menger.api",
    "TrainResult": "menger.runtime",
    "Observer": "menger.runtime",
    "ExperimentConfig": "menger.experiment",
    "load_experiment": "menger.experiment",
    "ConfigError": "menger.config",
}

__all__ = ["ConfigError", "ExperimentConfig", "Observer", "Policy", "ScriptObjectError", "TrainResult",
           "UntrustedRunError", "__version__", "load_experiment", "load_policy", "load_run_config", "resume", "train"]

if TYPE_CHECKING:  # what a type checker sees of the names that load on first use
    from typing import Any

    from menger.api import (Policy, ScriptObjectError, UntrustedRunError, load_policy, load_run_config, resume,
                            train)
    from menger.config import ConfigError
    from menger.experiment import ExperimentConfig, load_experiment
    from menger.runtime import Observer, TrainResult


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'menger' has no attribute {name!r}; its public names: {', '.join(__all__)}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once: later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
