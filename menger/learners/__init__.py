"""Learners: pure losses plus a short optimizer step, one class per family of algorithms."""
from menger.learners.learner import Learner, PPOLearner, VTraceLearner, make_learner

__all__ = ["Learner", "PPOLearner", "VTraceLearner", "make_learner"]
