"""The worker-level half of an algorithm: its `builder` module (beside its spec) builds its learner and the parts
its actors need, loaded when a run starts. A builder defines

    make_learner(config, policy, device) -> Learner          what steps on batches (or applies pushed gradients)
    actor_parts(config, policy, *, actor_id, incarnation, restore) -> dict
                                                             optional: sets up exploration on `policy` and
                                                             returns extra `Actor` keywords (gradient,
                                                             sequence_period); none by default
"""
from __future__ import annotations

import importlib
from types import ModuleType

import torch
from torch import nn

from menger.algorithms import get


def builder(algo: str) -> ModuleType:
    """The builder module of the algorithm called `algo`."""
    return importlib.import_module(get(algo).builder)


def make_learner(config, policy: nn.Module, device: torch.device):
    """The learner of `config.algo` for `policy` (what actors act with; a learner adds what only it needs)."""
    return builder(config.algo).make_learner(config, policy, device)


def actor_parts(config, policy: nn.Module, *, actor_id: int, incarnation: int, restore: dict | None) -> dict:
    """What an actor of `config.algo` needs beyond its envs and policy: exploration set on `policy`, and extra
    `Actor` keywords."""
    parts = getattr(builder(config.algo), "actor_parts", None)
    if parts is None:
        return {}
    return parts(config, policy, actor_id=actor_id, incarnation=incarnation, restore=restore)


def learner_kwargs(config, device: torch.device) -> dict:
    """What every unroll learner takes beside its policy and settings."""
    return dict(device=device, total_frames=config.stop.env_frames, amp=config.runtime.learner.amp,
                seed=config.runtime.seed)


def explore_like_apex(config, policy, actor_id: int) -> None:
    """Ape-X's exploration: every actor (or env) acts with its own epsilon of the algorithm's section."""
    settings, rt = get(config.algo).config(config), config.runtime
    if settings.epsilon_per == "env":  # env b of actor i is copy i * B + b of N = actors x B
        policy.explore([actor_id * rt.envs_per_actor + b for b in range(rt.envs_per_actor)],
                       rt.actors * rt.envs_per_actor, settings.epsilon_base, settings.epsilon_alpha)
    else:
        policy.explore([actor_id] * rt.envs_per_actor, rt.actors, settings.epsilon_base, settings.epsilon_alpha)


__all__ = ["actor_parts", "builder", "explore_like_apex", "learner_kwargs", "make_learner"]
