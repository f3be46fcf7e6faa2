"""SAC: its registry entry (`spec`) and what builds its learner and actors (`builder`)."""
