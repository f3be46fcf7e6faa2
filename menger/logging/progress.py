"""What a person watching a run sees: a live table on a terminal, a plain line every few seconds in CI.

The two views show the same rows (built by the pure ``progress_rows``), so what CI logs say is what
the terminal said. The live view also says how long ago the last metrics came in and turns red
when they stop, so a hang is never silent on screen.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from menger.logging.format import (
    MISSING,
    as_finite,
    format_count,
    format_drops,
    format_duration,
    format_number,
)

PLAIN_INTERVAL_S = 5.0
LIVE_REFRESHES_PER_S = 4
STALE_AFTER_S = 10.0


def progress_rows(
    metrics: Mapping[str, object],
    *,
    target_return: float | None = None,
    total_frames: int | None = None,
) -> list[tuple[str, str]]:
    """(label, value) pairs for the progress display, from one metrics dict."""
    rows = [
        ("frames", _frames_text(metrics, total_frames)),
        ("fps", f"{format_count(metrics.get('learner/fps'))} learner, {format_count(metrics.get('actor/fps'))} actors"),
        ("episodes", format_count(metrics.get("episode/count"))),
        ("return", _return_text(metrics, None if _evaluated(metrics) else target_return)),
        ("eval return", _return_text(metrics, target_return, "eval/return_mean") if _evaluated(metrics) else MISSING),
        ("policy lag", _lag_text(metrics)),
        ("updates/s", format_number(metrics.get("learner/updates_per_s"), 3)),
        ("drops", format_drops(metrics)),
        ("restarts", _restarts_text(metrics)),
        ("elapsed", format_duration(metrics.get("time/wall_s"))),
    ]
    return [(label, value) for label, value in rows if label != "eval return" or value != MISSING]


def plain_line(name: str, rows: list[tuple[str, str]]) -> str:
    """The rows on one line, for logs that are read later rather than watched."""
    return f"[{name}] " + " | ".join(f"{label} {value}" for label, value in rows)


def _frames_text(metrics: Mapping[str, object], total_frames: int | None) -> str:
    frames = as_finite(metrics.get("time/env_frames"))
    if frames is None:
        return MISSING
    if not total_frames:
        return format_count(frames)
    text = f"{format_count(frames)} / {format_count(total_frames)} ({100.0 * frames / total_frames:.1f}%)"
    fps = as_finite(metrics.get("learner/fps"))
    if fps and frames < total_frames:
        text += f", ETA {format_duration((total_frames - frames) / fps)}"
    return text


def _evaluated(metrics: Mapping[str, object]) -> bool:
    return as_finite(metrics.get("eval/return_mean")) is not None


def _return_text(metrics: Mapping[str, object], target_return: float | None, key: str = "episode/return_mean") -> str:
    text = format_number(metrics.get(key))
    if target_return is not None:
        text += f" (target {format_number(target_return)})"
    return text


def _lag_text(metrics: Mapping[str, object]) -> str:
    mean, peak = metrics.get("learner/policy_lag_mean"), metrics.get("learner/policy_lag_max")
    if as_finite(mean) is None and as_finite(peak) is None:
        return MISSING
    return f"mean {format_number(mean, 3)}, max {format_number(peak, 3)}"


def _restarts_text(metrics: Mapping[str, object]) -> str:
    text = format_count(metrics.get("actor/restarts"))
    alive = as_finite(metrics.get("actor/alive"))
    return text if alive is None else f"{text} ({format_count(alive)} actors alive)"


class TerminalProgress:
    """A Logger that shows training progress to a person.

    On a terminal (and with ``enabled``) it keeps a rich live table, refreshed at most
    ``LIVE_REFRESHES_PER_S`` times a second by rich's own thread. Otherwise (CI, a redirected stdout,
    or ``enabled=False``) it prints one plain line at the first write and then at most one every
    ``PLAIN_INTERVAL_S`` seconds, plus a last line on ``close`` if anything changed since.
    ``clock`` exists so tests can drive time.
    """

    def __init__(
        self,
        name: str,
        target_return: float | None = None,
        total_frames: int | None = None,
        console: Console | None = None,
        enabled: bool = True,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.target_return = target_return
        self.total_frames = total_frames
        self._console = console if console is not None else Console()
        self._clock = clock
        self.live = enabled and self._console.is_terminal
        self._metrics: dict[str, object] = {}
        self._last_write_at: float | None = None
        self._last_line_at: float | None = None
        self._unprinted = False
        self._display: Live | None = None
        self._closed = False

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        if self._closed:
            raise ValueError(f"TerminalProgress {self.name!r} is closed; create a new one to keep showing progress.")
        self._metrics = {"time/env_frames": step, **metrics}
        self._last_write_at = self._clock()
        if self.live:
            self._start_display()
        else:
            self._unprinted = True
            if self._last_line_at is None or self._last_write_at - self._last_line_at >= PLAIN_INTERVAL_S:
                self._print_line()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._display is not None:
            self._display.stop()
        elif self._unprinted:
            self._print_line()

    def rows(self) -> list[tuple[str, str]]:
        """What the display shows for the latest metrics."""
        return progress_rows(self._metrics, target_return=self.target_return, total_frames=self.total_frames)

    def _print_line(self) -> None:
        self._console.print(plain_line(self.name, self.rows()), markup=False, highlight=False, soft_wrap=True)
        self._last_line_at = self._clock()
        self._unprinted = False

    def _start_display(self) -> None:
        if self._display is None:
            self._display = Live(
                get_renderable=self._render,
                console=self._console,
                refresh_per_second=LIVE_REFRESHES_PER_S,
                transient=False,
            )
            self._display.start()

    def _render(self) -> Table:
        table = Table(title=f"menger: {self.name}", title_justify="left", show_header=False, box=None)
        table.add_column(style="dim", no_wrap=True)
        table.add_column()
        for label, value in self.rows():
            table.add_row(label, self._styled(label, value))
        frames = as_finite(self._metrics.get("time/env_frames"))
        if self.total_frames and frames is not None:
            done = min(frames, float(self.total_frames))
            table.add_row("progress", ProgressBar(total=float(self.total_frames), completed=done, width=40))
        table.caption = self._freshness()
        table.caption_justify = "left"
        return table

    def _styled(self, label: str, value: str) -> Text:
        reached = as_finite(self._metrics.get("episode/return_mean"))
        if label == "return" and self.target_return is not None and reached is not None:
            return Text(value, style="bold green" if reached >= self.target_return else "")
        if label in ("drops", "restarts") and value not in (MISSING, "0") and not value.startswith("0 "):
            return Text(value, style="yellow")
        return Text(value)

    def _freshness(self) -> Text:
        if self._last_write_at is None:
            return Text("waiting for the first metrics", style="dim")
        age = self._clock() - self._last_write_at
        if age >= STALE_AFTER_S:
            return Text(f"no new metrics for {format_duration(age)}: is the learner stalled?", style="bold red")
        return Text(f"updated {format_duration(age)} ago", style="dim")

    def __enter__(self) -> "TerminalProgress":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
