"""Moved to `menger.tuning.search` (tuning); this path works for this release only."""
from menger._moved import alias

alias(__name__, "menger.tuning.search")
