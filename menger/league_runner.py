"""Moved to `menger.launch.league` (beside the launchers); this path works for this release only."""
from menger._moved import alias

alias(__name__, "menger.launch.league")
