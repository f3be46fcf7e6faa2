"""Menger's algorithms, one folder each (`ppo/`, `impala/`, ..., `pqn/`): its registry entry in `spec.py`, its
learner and actor parts in `builder.py`. The contract and the registry are `menger.registry`; a plug-in's spec
imports `Algorithm` from here or from there.

    from menger.algorithms import Algorithm, get

    algorithm = get("ppo")       # the registry entry: what the runtime asks of PPO
"""
from menger.registry import (ACTION_FAMILIES, BUILT_IN, ENTRY_POINT_GROUP, Algorithm, actor_parts, all_algorithms,
                             builder, get, listing, make_learner, names, sections, that)

__all__ = ["ACTION_FAMILIES", "Algorithm", "BUILT_IN", "ENTRY_POINT_GROUP", "actor_parts", "all_algorithms",
           "builder", "get", "listing", "make_learner", "names", "sections", "that"]
