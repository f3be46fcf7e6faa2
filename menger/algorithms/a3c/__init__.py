"""A3C (and A2C): its registry entry (`spec`) and what builds its learner and actor-learners (`builder`)."""
