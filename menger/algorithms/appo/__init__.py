"""APPO: its registry entry (`spec`) and what builds its learner (`builder`)."""
