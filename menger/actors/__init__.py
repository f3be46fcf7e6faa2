"""Actors: step B envs with batched inference on cached parameters and emit tagged unrolls. What builds one from
an experiment is the runtime's (`menger.runtime.actors.make_actor`), handed to the transport that places it."""
from menger.actors.actor import Actor

__all__ = ["Actor"]
