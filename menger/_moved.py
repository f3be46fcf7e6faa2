"""Module paths of earlier versions: the old name stays importable, as the module that now lives elsewhere, with a
DeprecationWarning, for one release."""
from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make the module `old` (the caller's own `__name__`) the module `new`, and say where it went."""
    warnings.warn(f"{old} has moved to {new}; the old path works for this release only", DeprecationWarning,
                  stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
