"""R2D2: its registry entry (`spec`) and what builds its learner and recurrent actors (`builder`)."""
