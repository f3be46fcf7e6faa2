"""Moved to `menger.cli.supervise` (the command line and its supervisor together); this path works for this
release only."""
from menger._moved import alias

alias(__name__, "menger.cli.supervise")
