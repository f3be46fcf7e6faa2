"""Classes and functions handed to the Python API in place of a `module:attribute` string.

A config is data (`config.yaml`, `--set`, a resume, a Ray worker's copy), so an object given to
``menger.train(config, env=MyEnv, network=MyNet)`` is recorded by the name that imports it again,
``module:qualname``: ``__main__:MyEnv`` for a class defined in the user's script, ``mypkg.envs:MyEnv`` for one
defined in a package. Every place that builds the env or the network resolves that name, in its own process:

* the trainer's own process and its threads (``runtime.launcher: threads``, the evaluator, a league's learners)
  see the script's ``__main__`` as it is;
* processes forked from it (``runtime.launcher: processes``, central inference, several learners) inherit it;
* Ray's workers import the module by name and never run the script, so an object of ``__main__`` cannot reach
  them (`menger.experiment.checks` refuses it with ``runtime.launcher: ray``): it must live in a module every
  node can import.

An object that no name finds again (a lambda, a class defined inside a function, a ``functools.partial``, an
instance) is refused here, saying what to pass instead.
"""
from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

MAIN = "__main__"


def importable_name(value: Any, key: str) -> str:
    """The `module:attribute` string a config records for `value`, a class or a top-level function given for the
    config key `key` (``env.id``, ``model.network``); a string is returned as it is.

    Raises TypeError for what is not a class or a function, ValueError for one that its name would not find
    again (defined inside a function, a lambda, redefined since)."""
    if isinstance(value, str):
        return value
    what = _kind(value)
    if what is not None:
        raise TypeError(f"{key}: got {what}; pass a class or a function defined at the top level of a module or of "
                        f"your script (Menger builds a fresh one in every actor), or a string ({_example(key)})")
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
    if "<lambda>" in qualname or "<locals>" in qualname or "." in qualname or not module:
        raise ValueError(f"{key}: {qualname or value!r} is defined inside a function or a class (or is a lambda), so "
                         "no process but this one can find it by name, and a config records it by name; define it "
                         "at the top level of your script or of a module")
    found = getattr(sys.modules.get(module), qualname, None)
    if found is not value:
        raise ValueError(f"{key}: {module}:{qualname} names {'nothing' if found is None else 'another object'} now "
                         f"(was {qualname} redefined or deleted after it was made?); pass the object that "
                         f"{module}.{qualname} holds")
    return f"{module}:{qualname}"


def is_main(name: str | None) -> bool:
    """Whether a `module:attribute` string names an object of the running script (``__main__``)."""
    return bool(name) and str(name).partition(":")[0].strip() == MAIN


def _kind(value: Any) -> str | None:
    """What `value` is when it is not a class or a plain function (None when it is one)."""
    if isinstance(value, type) or inspect.isfunction(value):
        return None
    if isinstance(value, functools.partial):
        return "a functools.partial (give its keyword arguments in env.kwargs or model.kwargs instead)"
    return f"{value!r:.60}, an instance of {type(value).__name__}"


def _example(key: str) -> str:
    return "'package.module:Class'" if key == "model.network" else "'CartPole-v1', 'package.module:ClassOrFactory'"
