"""Actors: step B envs with batched local inference on cached parameters and emit tagged unrolls."""
from menger.actors.actor import Actor, ActorLinks, run_actor

__all__ = ["Actor", "ActorLinks", "run_actor"]
