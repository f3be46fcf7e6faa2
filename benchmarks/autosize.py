"""Runtime auto-sizing against a grid search, in the same run: does the layout `auto` picks learn as many env
frames/s as the best of actors x envs_per_actor?

For each case (cartpole-ppo, cartpole-impala, pong-impala):

* **grid**: every layout of `--actors` x the case's envs per actor (the preset's other settings, its
  batch_unrolls included) trains for `--window-s` seconds; its rate is learned env frames/s from its first
  update to its last (frames the learner stepped on; start-up left out), or, when the window held fewer than
  two updates, its frames over its whole training time (said on stderr);
* **auto**: the same preset with `runtime.actors`, `runtime.envs_per_actor` (and, for async, `runtime.
  coordination.batch_unrolls`) set to `auto`, trained as a user would (`menger.api.train`): the start-up
  measurement picks the layout, `autosize.json` says which and how long the picking took, and the run's rate
  is read the same way;
* every figure is the median of `--repeats` rounds; each round runs every grid layout and then auto, so all of
  them see about the same load. The table gives the best grid layout, auto's layout, the ratio of their rates
  (target >= 0.90) and the picking seconds (target <= 30), and the 1-minute load average after each round.

    python benchmarks/autosize.py [--cases cartpole-ppo cartpole-impala pong] [--actors 1 2] [--window-s S]
                                  [--repeats N] [--quick] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from throughput import benchmark_overrides

from menger.api import train
from menger.runtime import Observer


@dataclass(frozen=True)
class Case:
    label: str
    preset: str
    envs: tuple[int, ...]       # the grid's envs per actor
    window_s: float             # training seconds per run (a sync PPO round on big batches takes seconds)
    auto_batch: bool            # async: batch_unrolls is auto too


CASES = {
    "cartpole-ppo": Case("CartPole PPO", "cartpole-ppo", (16, 64, 256, 768), 15.0, False),
    "cartpole-impala": Case("CartPole IMPALA", "cartpole-impala", (16, 64, 256, 768), 10.0, True),
    "pong": Case("Pong APPO", "pong-impala", (8, 16, 32), 60.0, True),
}
QUICK = {"cartpole-ppo": (16, 256), "cartpole-impala": (16, 256), "pong": (8, 16)}
AUTO = ("runtime.actors=auto", "runtime.envs_per_actor=auto")


class UpdateClock(Observer):
    """When each update was applied and how many frames had been learned by then."""

    def __init__(self):
        self.points: list[tuple[float, int]] = []

    def on_update(self, trainer, stats: dict) -> None:
        self.points.append((time.monotonic(), trainer.accounts.accepted))

    def rate(self) -> float | None:
        """Learned env frames/s from the first update to the last: start-up is left out, and a sync run whose
        updates are seconds apart is read at update boundaries, not at log records that split its rounds. None
        with fewer than two updates."""
        if len(self.points) < 2:
            return None
        (t0, f0), (t1, f1) = self.points[0], self.points[-1]
        return (f1 - f0) / (t1 - t0)


def run_layout(preset: str, overrides: list[str], window_s: float, seed: int) -> dict:
    """Train for `window_s` seconds; the learned rate, and what autosize.json says when the layout was auto."""
    clock = UpdateClock()
    with tempfile.TemporaryDirectory(prefix="menger-autosize-") as run_dir:
        began = time.monotonic()
        result = train(preset, overrides=benchmark_overrides(window_s, seed) + list(overrides), run_dir=run_dir,
                       observers=[clock])
        rate, final = clock.rate(), result.final_metrics
        if rate is None:  # too slow for two updates in the window: its frames over all of its time, start-up too
            rate = final["time/env_frames"] / final["time/wall_s"]
            print(f"{preset} {' '.join(overrides)}: {len(clock.points)} update(s) in {window_s:g} s; rate over "
                  "the whole run, start-up included (give a longer --window-s)", file=sys.stderr, flush=True)
        out = {"rate": rate, "updates": len(clock.points), "command_s": time.monotonic() - began}
        report = Path(run_dir) / "autosize.json"
        if report.exists():
            data = json.loads(report.read_text())
            out.update(picked=data["picked"], picking_s=data["measured_s"],
                       predicted=data["predicted_frames_per_s"], bound=data["bound"], ranked=data["ranked"],
                       reasons=data["reasons"])
    return out


def layout_text(actors: int, envs: int, batch: int | None = None) -> str:
    return f"{actors}x{envs}" + (f"/U{batch}" if batch else "")


def bench_case(case: Case, actors: tuple[int, ...], envs: tuple[int, ...], window_s: float, repeats: int) -> dict:
    grid: dict[str, list[float]] = {layout_text(a, b): [] for a in actors for b in envs}
    autos: list[dict] = []
    loads = []
    auto = list(AUTO) + (["runtime.coordination.batch_unrolls=auto"] if case.auto_batch else [])
    for seed in range(repeats):
        for a in actors:
            for b in envs:
                figures = run_layout(case.preset, [f"runtime.actors={a}", f"runtime.envs_per_actor={b}"], window_s,
                                     seed)
                grid[layout_text(a, b)].append(figures["rate"])
                print(f"{case.label} round {seed}: {layout_text(a, b)} {figures['rate']:,.0f} frames/s",
                      file=sys.stderr, flush=True)
        picked = run_layout(case.preset, auto, window_s, seed)
        autos.append(picked)
        loads.append(os.getloadavg()[0])
        p = picked["picked"]
        print(f"{case.label} round {seed}: auto {layout_text(p['actors'], p['envs_per_actor'], p['batch_unrolls'])} "
              f"{picked['rate']:,.0f} frames/s (picked in {picked['picking_s']:.1f} s)", file=sys.stderr, flush=True)
    medians = {name: statistics.median(rates) for name, rates in grid.items()}
    best = max(medians, key=medians.get)
    auto_rate = statistics.median(run["rate"] for run in autos)
    picks = [layout_text(r["picked"]["actors"], r["picked"]["envs_per_actor"], r["picked"]["batch_unrolls"])
             for r in autos]
    return {"case": case.label, "preset": case.preset, "window_s": window_s, "grid": grid, "grid_median": medians,
            "best_layout": best, "best_rate": medians[best], "auto_layouts": picks, "auto_rate": auto_rate,
            "auto_rates": [r["rate"] for r in autos], "auto_predicted": [r["predicted"] for r in autos],
            "auto_runs": autos,
            "ratio": auto_rate / medians[best], "picking_s": max(r["picking_s"] for r in autos),
            "load_average_1min": loads}


def format_table(rows: list[dict]) -> str:
    header = (f"{'case':16s} {'best grid':>10s} {'frames/s':>10s} {'auto picks':>16s} {'frames/s':>10s} "
              f"{'auto/best':>9s} {'picking s':>9s}")
    lines = [header, "-" * len(header)]
    for row in rows:
        picks = ",".join(dict.fromkeys(row["auto_layouts"]))
        lines.append(f"{row['case']:16s} {row['best_layout']:>10s} {row['best_rate']:>10,.0f} {picks:>16s} "
                     f"{row['auto_rate']:>10,.0f} {row['ratio']:>9.2f} {row['picking_s']:>9.1f}")
    lines.append("")
    for row in rows:
        grid = ", ".join(f"{name} {rate:,.0f}" for name, rate in row["grid_median"].items())
        loads = ", ".join(f"{load:.1f}" for load in row["load_average_1min"])
        predicted = ", ".join(f"{p:,.0f}" for p in row["auto_predicted"])
        lines.append(f"{row['case']}: grid {grid}; auto predicted {predicted}; load after each round {loads}")
    repeats = len(rows[0]["auto_rates"]) if rows else 0
    windows = ", ".join(f"{row['window_s']:g}" for row in rows)
    lines.append(f"learned env frames/s, medians of {repeats} round(s); training windows of {windows} s; "
                 f"{os.cpu_count()} cores; targets: auto/best >= 0.90, picking <= 30 s")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--actors", nargs="+", type=int, default=[1, 2], help="the grid's actor counts")
    parser.add_argument("--envs", nargs="+", type=int, default=None, help="the grid's envs per actor (default: "
                        "each case's own)")
    parser.add_argument("--window-s", type=float, default=None, help="training seconds per run (default: each "
                        "case's own: 15 cartpole-ppo, 10 cartpole-impala, 60 pong)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds; the table shows medians")
    parser.add_argument("--quick", action="store_true", help="two envs sizes per case, one round")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.quick:
        args.repeats = 1
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    rows = []
    for name in args.cases:
        case = CASES[name]
        envs = tuple(args.envs) if args.envs else QUICK[name] if args.quick else case.envs
        rows.append(bench_case(case, tuple(args.actors), envs, args.window_s or case.window_s, args.repeats))
    print(format_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
