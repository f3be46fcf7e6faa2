"""The short table the CLI prints when a run ends (or when asked about a finished run).

Takes the last metrics dict of a run, e.g. ``read_jsonl(run_dir / "metrics.jsonl")[-1]``; rows whose
metric is absent are left out, so the same table serves every algorithm and launcher.
"""

from __future__ import annotations

from typing import Mapping

from rich.console import Console
from rich.table import Table

from menger.logging.format import (
    MISSING,
    as_finite,
    format_count,
    format_drops,
    format_duration,
    format_number,
)


def summary_rows(metrics: Mapping[str, object], target_return: float | None = None) -> list[tuple[str, str]]:
    """(label, value) pairs for the metrics present, in the order a reader asks about them."""
    frames = as_finite(metrics.get("time/env_frames", metrics.get("step")))
    wall_s = as_finite(metrics.get("time/wall_s"))
    rows = [
        ("env frames (learned from)", format_count(frames)),
        ("env frames produced", format_count(metrics.get("time/env_frames_produced"))),
        ("wall time", format_duration(wall_s)),
        ("average frames/s", format_count(frames / wall_s) if frames is not None and wall_s else MISSING),
        ("mean return (last 20 episodes)", _return_text(metrics, None if _has_eval(metrics) else target_return)),
        ("deterministic evaluation return", _return_text(metrics, target_return, "eval/return_mean")),
        ("replay size / samples per insert", _pair(metrics, "replay/size", "replay/samples_per_insert")),
        ("mean episode length", format_number(metrics.get("episode/length_mean"))),
        ("episodes", format_count(metrics.get("episode/count"))),
        ("learner updates", format_count(metrics.get("learner/updates"))),
        ("policy lag mean / max", _pair(metrics, "learner/policy_lag_mean", "learner/policy_lag_max")),
        ("loss", format_number(metrics.get("learner/loss"))),
        ("entropy", format_number(metrics.get("learner/entropy"))),
        ("frames dropped", format_drops(metrics)),
        ("actor restarts", format_count(metrics.get("actor/restarts"))),
    ]
    return [(label, value) for label, value in rows if value != MISSING]


def summary_table(
    metrics: Mapping[str, object], *, title: str = "Run summary", target_return: float | None = None
) -> Table:
    """A two-column rich table of ``summary_rows``."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in summary_rows(metrics, target_return):
        table.add_row(label, value)
    return table


def print_summary(
    metrics: Mapping[str, object],
    console: Console | None = None,
    *,
    title: str = "Run summary",
    target_return: float | None = None,
) -> None:
    """Print ``summary_table`` to ``console`` (stdout when not given)."""
    (console if console is not None else Console()).print(
        summary_table(metrics, title=title, target_return=target_return)
    )


def _has_eval(metrics: Mapping[str, object]) -> bool:
    """The run evaluates deterministically (apex, sac): that, not the exploring actors' return, meets the target."""
    return as_finite(metrics.get("eval/return_mean")) is not None


def _return_text(metrics: Mapping[str, object], target_return: float | None, key: str = "episode/return_mean") -> str:
    reached = as_finite(metrics.get(key))
    if reached is None:
        return MISSING
    if target_return is None:
        return format_number(reached)
    verdict = "reached" if reached >= target_return else "not reached"
    return f"{format_number(reached)} (target {format_number(target_return)}, {verdict})"


def _pair(metrics: Mapping[str, object], first: str, second: str) -> str:
    if as_finite(metrics.get(first)) is None and as_finite(metrics.get(second)) is None:
        return MISSING
    return f"{format_number(metrics.get(first), 3)} / {format_number(metrics.get(second), 3)}"


class LogLines:
    """One plain line per metrics record, for `--no-progress` and for output that is not a terminal (a log
    file, CI, `nohup`): the live display's figures without its redrawing. A logger: `write(metrics, step)`."""

    def __init__(self, name: str, stream=None, target_return: float | None = None):
        import sys

        self.name, self.stream, self.target_return = name, stream or sys.stdout, target_return

    def write(self, metrics: Mapping[str, object], step: int) -> None:
        parts = [f"{self.name}", f"{format_duration(metrics.get('time/wall_s'))}",
                 f"frames {format_count(metrics.get('time/env_frames'))}",
                 f"{format_count(metrics.get('learner/fps'))}/s",
                 f"updates {format_count(metrics.get('learner/updates'))}"]
        target = f" (target {self.target_return:g})" if self.target_return is not None else ""
        evaluated = _has_eval(metrics)
        if metrics.get("episode/return_mean") is not None:
            parts.append(f"return {format_number(metrics.get('episode/return_mean'))}{'' if evaluated else target}")
        if evaluated:
            parts.append(f"eval {format_number(metrics.get('eval/return_mean'))}{target}")
        parts.append(f"lag {format_number(metrics.get('learner/policy_lag_mean'), 2)}")
        parts.append(f"dropped {format_drops(metrics)}")
        if metrics.get("actor/restarts"):
            parts.append(f"restarts {format_count(metrics.get('actor/restarts'))}")
        print(" | ".join(parts), file=self.stream, flush=True)

    def close(self) -> None:
        pass
