"""Moved to `menger.commands.evaluate` (commands on a finished run); this path works for this release only."""
from menger._moved import alias

alias(__name__, "menger.commands.evaluate")
