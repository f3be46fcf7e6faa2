"""Actors: step B envs with batched inference on cached parameters and emit tagged unrolls."""
from menger.actors.actor import Actor, make_actor, run_actor

__all__ = ["Actor", "make_actor", "run_actor"]
