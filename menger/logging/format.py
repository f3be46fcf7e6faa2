"""Pure formatters shared by the live progress display and the final summary.

They take whatever a metrics dict may hold (a float, an int, ``None`` for a value JSONL stored as
null, or nothing at all) and always return a short string, so a missing or non-finite metric shows
as a dash instead of crashing the display halfway through a run.
"""

from __future__ import annotations

import math
from typing import Mapping

MISSING = "-"

_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def as_finite(value: object) -> float | None:
    """The value as a float, or None when it is absent, not a number, NaN or infinite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def format_count(value: object) -> str:
    """Large counts read at a glance: 1234567 -> '1.23M', 950 -> '950'."""
    number = as_finite(value)
    if number is None:
        return MISSING
    for scale, prefix in _SI_PREFIXES:
        if abs(number) >= scale:
            return f"{number / scale:.3g}{prefix}"
    return f"{number:.0f}" if number == round(number) else f"{number:.3g}"


def format_number(value: object, digits: int = 4) -> str:
    """A float with ``digits`` significant digits (losses, returns, lag)."""
    number = as_finite(value)
    return MISSING if number is None else f"{number:.{digits}g}"


def format_duration(value: object) -> str:
    """Seconds as '42s', '3m05s' or '2h07m', the precision a person watching a run needs."""
    seconds = as_finite(value)
    if seconds is None or seconds < 0:
        return MISSING
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"


def drop_reasons(metrics: Mapping[str, object], prefix: str = "transport/frames_dropped/") -> dict[str, float]:
    """Per-reason frame drops (``transport/frames_dropped/<reason>``) that are non-zero."""
    reasons = {}
    for key, value in metrics.items():
        number = as_finite(value)
        if key.startswith(prefix) and number:
            reasons[key[len(prefix):]] = number
    return reasons


def format_drops(metrics: Mapping[str, object]) -> str:
    """Dropped frames with their reasons and share of produced frames: '120 (0.4%; stale 100, nan 20)'."""
    total = as_finite(metrics.get("transport/frames_dropped"))
    reasons = drop_reasons(metrics)
    if total is None and not reasons:
        return MISSING
    if total is None:
        total = sum(reasons.values())
    details = []
    produced = as_finite(metrics.get("time/env_frames_produced"))
    if produced:
        details.append(f"{100.0 * total / produced:.2g}%")
    if reasons:
        details.append(", ".join(f"{name} {format_count(count)}" for name, count in sorted(reasons.items())))
    suffix = f" ({'; '.join(details)})" if details and total else ""
    return format_count(total) + suffix
