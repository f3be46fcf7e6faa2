"""`menger train EXP --seeds 1 2 3 [--parallel N]`: one run per seed under one parent, then a summary.

    RUN_DIR/seed-1/ seed-2/ seed-3/     ordinary run directories (`menger eval`, `resume`, `plot` take each)
    RUN_DIR/seed-K.log                  with --parallel N > 1: that seed's output
    RUN_DIR/seeds.json                  each seed's exit code, frames and final returns; the mean and interval
    RUN_DIR/plot.png                    every seed's curve, their mean and its 95 % bootstrap band (`menger plot`)

Each seed trains as `menger train ... --seed K --run-dir RUN_DIR/seed-K` in a child process (its own session,
so `--supervise` and every other option work as for one run), one after another, or N at a time with
`--parallel N`. A seed that fails does not stop the others; the exit code is the first failure's. SIGINT,
SIGTERM and SIGHUP are passed on to the seeds running (each writes its checkpoint and stops) and no further seed
starts; the summary says which to resume.
"""
from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SUMMARY_FILE = "seeds.json"


def seed_dir(parent: Path, seed: int) -> Path:
    return parent / f"seed-{seed}"


def train_seeds(train_argv: list[str], seeds: Sequence[int], parent: Path, *, parallel: int = 1,
                debug: bool = False) -> int:
    """Train `train_argv` (a `menger train` command line without --seed and --run-dir) once per seed; see above."""
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"menger train --seeds {' '.join(map(str, seeds))}: a seed is given twice; give each once")
    if parallel < 1:
        raise SystemExit(f"--parallel {parallel}: give the number of seeds to train at once, 1 or more")
    taken = [seed for seed in seeds if (seed_dir(parent, seed) / "config.yaml").exists()]
    if taken:
        raise SystemExit(f"{parent} already holds runs of seeds {', '.join(map(str, taken))}; give another --run-dir, "
                         f"or continue one with: menger resume {seed_dir(parent, taken[0])}")
    parent.mkdir(parents=True, exist_ok=True)
    how = "one after another" if parallel == 1 else f"{min(parallel, len(seeds))} at a time"
    print(f"training seeds {', '.join(map(str, seeds))} ({how}) -> {parent}", flush=True)
    codes, stopped_by = _run_seeds(train_argv, seeds, parent, parallel, debug)
    summary = summarize(parent, seeds, codes)
    (parent / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    print(format_summary(summary))
    if any(row["frames"] for row in summary["seeds"]):
        try:
            from menger.commands.compare import plot_comparison

            print(f"plot:    {plot_comparison([str(parent)])}")
        except Exception as exc:  # noqa: BLE001 - a plot failure must not hide the results
            print(f"plot:    not written ({exc})")
    print(f"results: {parent}  (seed-K/ run directories, {SUMMARY_FILE}; compare with: menger plot {parent} ...)")
    if stopped_by is not None:
        left = [seed for seed in seeds if seed not in codes]
        stopped = [seed for seed, code in codes.items() if code != 0]
        if stopped:
            print("stopped with a checkpoint; continue with: " + "; ".join(
                f"menger resume {seed_dir(parent, seed)}" for seed in stopped))
        if left:
            print(f"not started: seeds {', '.join(map(str, left))}")
        return 128 + stopped_by
    return next((code for code in codes.values() if code != 0), 0)


def _command(train_argv: list[str], seed: int, parent: Path, debug: bool, quiet: bool) -> list[str]:
    extra = (["--no-progress"] if quiet and "--no-progress" not in train_argv else []) + (["--debug"] if debug else [])
    return [sys.executable, "-m", "menger.cli", "train", *train_argv, "--seed", str(seed), "--run-dir",
            str(seed_dir(parent, seed)), *extra]


def _run_seeds(train_argv, seeds, parent: Path, parallel: int, debug: bool) -> tuple[dict[int, int], int | None]:
    """Exit code per seed that ran; the signal that stopped the whole, if one did."""
    running: dict[int, subprocess.Popen] = {}
    codes: dict[int, int] = {}
    stop_asked: list[int] = []

    def forward(signum, frame):
        stop_asked.append(signum)
        for child in running.values():
            if child.poll() is None:
                child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    logs = []
    try:
        waiting = list(seeds)
        while waiting or running:
            while waiting and len(running) < parallel and not stop_asked:
                seed = waiting.pop(0)
                output = None
                if parallel > 1:
                    output = open(parent / f"seed-{seed}.log", "w")  # noqa: SIM115 - closed below
                    logs.append(output)
                    print(f"seed {seed}: started (output in {parent / f'seed-{seed}.log'})", flush=True)
                running[seed] = subprocess.Popen(_command(train_argv, seed, parent, debug, parallel > 1),
                                                 stdout=output, stderr=subprocess.STDOUT if output else None,
                                                 start_new_session=True)
            if stop_asked and not running:
                break
            for seed, child in list(running.items()):
                code = child.poll()
                if code is not None:
                    codes[seed] = code if code >= 0 else 128 - code
                    del running[seed]
                    if parallel > 1:
                        print(f"seed {seed}: {'done' if code == 0 else f'ended with exit code {codes[seed]}'}",
                              flush=True)
            time.sleep(0.2 if running else 0)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for output in logs:
            output.close()
    return codes, (stop_asked[0] if stop_asked else None)


def final_values(run_dir: Path) -> dict:
    """A run's env frames, its last mean episode return and its last deterministic evaluation (None if absent)."""
    from menger.commands.plot import NoMetricsError, load_metrics

    try:
        records = load_metrics(run_dir)
    except NoMetricsError:
        return {"frames": None, "return": None, "eval_return": None}

    def last(key: str):
        values = [r[key] for r in records if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        return float(values[-1]) if values else None

    return {"frames": int(records[-1].get("step", 0)), "return": last("episode/return_mean"),
            "eval_return": last("eval/return_mean")}


def summarize(parent: Path, seeds: Sequence[int], codes: dict[int, int]) -> dict:
    """Per seed its run, exit code and final values; over the seeds that finished (exit 0), the mean of each
    final value and its 95 % percentile-bootstrap interval."""
    from menger.commands.bench import bootstrap_interval

    rows = [{"seed": seed, "run_dir": str(seed_dir(parent, seed)), "exit_code": codes.get(seed),
             **final_values(seed_dir(parent, seed))} for seed in seeds]
    over = {}
    for key in ("return", "eval_return"):
        values = [row[key] for row in rows if row["exit_code"] == 0 and row[key] is not None]
        if values:
            low, high = bootstrap_interval(values)
            over[key] = {"mean": sum(values) / len(values), "ci95": [low, high], "seeds": len(values)}
    return {"seeds": rows, "summary": over}


def _number(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else f"{value:,}"


def format_summary(summary: dict) -> str:
    lines = ["seed  exit  env frames  return (last episodes)  eval return"]
    for row in summary["seeds"]:
        code = "-" if row["exit_code"] is None else str(row["exit_code"])
        lines.append(f"{row['seed']:<5d} {code:<5s} {_number(row['frames']):>10s}  {_number(row['return']):>21s}  "
                     f"{_number(row['eval_return']):>11s}")
    for key, label in (("return", "return"), ("eval_return", "eval return")):
        if key in summary["summary"]:
            over = summary["summary"][key]
            lines.append(f"{label}: mean {_number(over['mean'])} over {over['seeds']} seeds, 95 % bootstrap interval "
                         f"of the mean [{_number(over['ci95'][0])}, {_number(over['ci95'][1])}]")
    if not summary["summary"]:
        lines.append("no seed finished: nothing to average")
    return "\n".join(lines)
