"""Menger: distributed deep reinforcement learning in the actor-learner style."""

__version__ = "0.1.0"
