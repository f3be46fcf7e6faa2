"""Tuning: hyperparameter search over trials (`search`, Optuna), and population-based training (`pbt`: the rules
and the population, `members`: where the members train, `lineage`: the tune directory's records)."""
