"""What several algorithms' builders share: an unroll learner's keywords and Ape-X's per-actor exploration.

A builder (`menger/algorithms/NAME/builder.py`) defines

    make_learner(config, policy, device) -> Learner          what steps on batches (or applies pushed gradients)
    actor_parts(config, policy, *, actor_id, incarnation, restore) -> dict
                                                             optional: sets up exploration on `policy` and
                                                             returns extra `Actor` keywords (gradient,
                                                             sequence_period); none by default

and `menger.registry.make_learner` / `actor_parts` load it by its spec's module when a run starts.
"""
from __future__ import annotations

import torch

from menger.registry import get


def learner_kwargs(config, device: torch.device) -> dict:
    """What every unroll learner takes beside its policy and settings."""
    return dict(device=device, total_frames=config.stop.env_frames, amp=config.runtime.learner.amp,
                seed=config.runtime.seed)


def explore_like_apex(config, policy, actor_id: int) -> dict:
    """Ape-X's exploration: every actor (or env) acts with its own epsilon of the algorithm's section, reached
    from `epsilon_start` over the run's first `epsilon_decay_frames`. Returns the actor's `exploration` keyword
    (None when the epsilons are fixed from the start)."""
    settings, rt = get(config.algo).config(config), config.runtime
    if settings.epsilon_per == "env":  # env b of actor i is copy i * B + b of N = actors x B
        policy.explore([actor_id * rt.envs_per_actor + b for b in range(rt.envs_per_actor)],
                       rt.actors * rt.envs_per_actor, settings.epsilon_base, settings.epsilon_alpha)
    else:
        policy.explore([actor_id] * rt.envs_per_actor, rt.actors, settings.epsilon_base, settings.epsilon_alpha)
    if settings.epsilon_decay_frames == 0:
        return {"exploration": None}
    start, run_frames = settings.epsilon_start, settings.epsilon_decay_frames / rt.actors

    def anneal(frames: int) -> None:  # an actor's own frames stand for 1/actors of the run's
        policy.anneal(start, frames / run_frames)

    return {"exploration": anneal}


__all__ = ["explore_like_apex", "learner_kwargs"]
