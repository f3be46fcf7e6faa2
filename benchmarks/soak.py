"""Memory soak: train CartPole IMPALA (async, processes launcher) for minutes and watch every process's RSS.

A leak that costs a few bytes per unroll is invisible in a test and fatal in a day-long run. This runs
the real topology, samples the resident set size (VmRSS) of the learner and of each actor process every
few seconds, and after a warm-up (allocators, caches and torch's lazy state settle) compares the start
of the measured window with its end. Exit status 1 when any process, or the total, grew by more than
--max-growth-pct.

    python benchmarks/soak.py [--minutes 20] [--interval 5] [--warmup 0.2] [--csv soak.csv] [--set KEY=VALUE ...]

The total double-counts shared memory that several processes have touched (the unroll slots, the
parameters): VmRSS counts it in each of them. The CSV also holds RssAnon, the private part, per sample.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from menger.api import train

SOAK_PRESET = "cartpole-impala"


# ----- reading /proc ----------------------------------------------------------------------------
def read_memory_kib(pid: int) -> dict[str, int] | None:
    """VmRSS and RssAnon of a process in KiB from /proc/<pid>/status; None if it has exited."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0])
    return fields if "VmRSS" in fields else None


def child_pids(parent: int) -> list[int]:
    """Live children of `parent` (the actor processes forked by the learner), from each /proc/<pid>/stat."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        # The command name (field 2) may hold spaces and parentheses: fields after the last ')' are safe.
        after_name = stat.rsplit(")", 1)[1].split()
        if int(after_name[1]) == parent:
            children.append(int(entry.name))
    return sorted(children)


@dataclass(frozen=True)
class Sample:
    elapsed_s: float
    pid: int
    role: str
    rss_kib: int
    anon_kib: int


def sample_processes(learner_pid: int, elapsed_s: float) -> list[Sample]:
    """One sample of the learner and each of its live children."""
    samples = []
    for pid in [learner_pid] + child_pids(learner_pid):
        memory = read_memory_kib(pid)
        if memory is not None:
            role = "learner" if pid == learner_pid else f"actor-{pid}"
            samples.append(Sample(elapsed_s, pid, role, memory["VmRSS"], memory.get("RssAnon", 0)))
    return samples


class Sampler:
    """Samples RSS every `interval_s` from a background thread until stopped."""

    def __init__(self, learner_pid: int, interval_s: float):
        self.learner_pid, self.interval_s = learner_pid, interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def __enter__(self) -> "Sampler":
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.extend(sample_processes(self.learner_pid, time.monotonic() - self._started))


# ----- growth -------------------------------------------------------------------------------------
def growth_pct(series: list[tuple[float, int]], warmup_fraction: float, duration_s: float) -> float | None:
    """Growth in % of an RSS series over the measured window (after the warm-up).

    The window's start and end are each the median of its first and last tenth of samples (at least one),
    so one sample caught mid-allocation does not decide the verdict. None when the window has under two samples.
    """
    window = [rss for elapsed, rss in series if elapsed >= warmup_fraction * duration_s]
    if len(window) < 2:
        return None
    edge = max(1, len(window) // 10)
    start, end = statistics.median(window[:edge]), statistics.median(window[-edge:])
    return 100.0 * (end - start) / start


def series_by_role(samples: list[Sample]) -> dict[str, list[tuple[float, int]]]:
    out: dict[str, list[tuple[float, int]]] = {}
    for s in samples:
        out.setdefault(s.role, []).append((s.elapsed_s, s.rss_kib))
    return out


def total_series(samples: list[Sample]) -> list[tuple[float, int]]:
    """Summed RSS of all processes at each sampling instant."""
    totals: dict[float, int] = {}
    for s in samples:
        totals[s.elapsed_s] = totals.get(s.elapsed_s, 0) + s.rss_kib
    return sorted(totals.items())


@dataclass(frozen=True)
class SoakReport:
    growth_pct: dict[str, float | None]  # per role, and "total"
    peak_total_mib: float
    bytes_per_env_slot: int
    samples: int
    env_frames: int

    def worst_growth(self) -> float:
        return max((g for g in self.growth_pct.values() if g is not None), default=0.0)


def summarise(samples: list[Sample], warmup_fraction: float, duration_s: float, final_metrics: dict) -> SoakReport:
    growth = {role: growth_pct(series, warmup_fraction, duration_s)
              for role, series in series_by_role(samples).items()}
    totals = total_series(samples)
    growth["total"] = growth_pct(totals, warmup_fraction, duration_s)
    return SoakReport(growth, max((kib for _, kib in totals), default=0) / 1024,
                      int(final_metrics["transport/bytes_per_env_slot"]), len(samples),
                      int(final_metrics["time/env_frames"]))


def write_csv(samples: list[Sample], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["elapsed_s", "pid", "role", "rss_kib", "rss_anon_kib"])
        for s in samples:
            writer.writerow([f"{s.elapsed_s:.2f}", s.pid, s.role, s.rss_kib, s.anon_kib])


def format_report(report: SoakReport, limit_pct: float) -> str:
    lines = [f"{'process':16s} {'growth %':>9s}"]
    for role, growth in report.growth_pct.items():
        lines.append(f"{role:16s} {'n/a' if growth is None else f'{growth:+.2f}':>9s}")
    lines += [f"peak total RSS: {report.peak_total_mib:.1f} MiB (shared pages counted in every process that touched them)",
              f"shared-memory bytes per env slot: {report.bytes_per_env_slot:,d}",
              f"samples: {report.samples}; env frames learned: {report.env_frames:,d}",
              f"verdict: {'FAIL' if report.worst_growth() > limit_pct else 'ok'} "
              f"(largest growth {report.worst_growth():+.2f} %, limit {limit_pct} %)"]
    return "\n".join(lines)


# ----- the run ------------------------------------------------------------------------------------
def run_soak(minutes: float, interval_s: float, overrides: list[str] = ()) -> tuple[list[Sample], dict]:
    """Train for `minutes` in a throw-away run directory while sampling; (samples, the run's final metrics).

    Two actors rather than the preset's one, so that per-actor growth is seen in more than one process;
    checkpoints stay on (the preset's interval) because saving is part of what a long run does.
    """
    seconds = minutes * 60
    settings = [f"stop.wall_clock_s={seconds}", "stop.target_return=null", "stop.env_frames=null",
                "log.tensorboard=false", "log.progress=false", "runtime.launcher=processes", "runtime.actors=2",
                *overrides]
    with tempfile.TemporaryDirectory(prefix="menger-soak-") as run_dir, Sampler(os.getpid(), interval_s) as sampler:
        result = train(SOAK_PRESET, overrides=settings, run_dir=run_dir)
    return sampler.samples, result.final_metrics


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training time")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the run left out of the growth")
    parser.add_argument("--max-growth-pct", type=float, default=5.0, help="fail above this growth")
    parser.add_argument("--csv", type=Path, default=Path("soak.csv"), help="where the samples go")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="any config override, passed to the run (repeatable)")
    args = parser.parse_args(argv)
    if not 0.0 <= args.warmup < 1.0:
        parser.error(f"--warmup is a fraction of the run in [0, 1), got {args.warmup}")
    if args.interval <= 0 or args.minutes <= 0:
        parser.error("--minutes and --interval must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the soak, print the report, write the CSV; returns the exit status (1: memory grew past the limit)."""
    args = parse_args(argv)
    samples, final_metrics = run_soak(args.minutes, args.interval, args.overrides)
    write_csv(samples, args.csv)
    report = summarise(samples, args.warmup, args.minutes * 60, final_metrics)
    print(format_report(report, args.max_growth_pct))
    print(f"samples written to {args.csv}")
    return 1 if report.worst_growth() > args.max_growth_pct else 0


if __name__ == "__main__":
    sys.exit(main())
