"""GORILA: its registry entry (`spec`) and what builds its learner processes and actors (`builder`)."""
