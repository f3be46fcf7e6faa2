"""Moved to `menger.tuning.pbt` (tuning); this path works for this release only."""
from menger._moved import alias

alias(__name__, "menger.tuning.pbt")
