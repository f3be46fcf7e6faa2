"""Ape-X DQN: its registry entry (`spec`) and what builds its learner and exploring actors (`builder`)."""
