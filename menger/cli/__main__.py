"""`python -m menger.cli ...`: the `menger` command (what `menger train --supervise` runs as its child)."""
import sys

from menger.cli import main

sys.exit(main())
