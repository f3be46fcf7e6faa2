"""Population-based training against the same members with fixed settings, on the same per-member budget.

For each population seed S, two populations of N members start from the same draws of `tune:` (the learning rate,
`ppo.lr` log-uniform over [1e-5, 1e-1] by default, a range where it decides everything) and the same run seeds:

* **PBT**: ``menger tune cartpole-ppo --population N --ready R --seed S``: every R env frames a member the bottom
  quarter copies one of the top quarter and perturbs its values; the population stops when a member reaches the
  preset's target (a mean return of 475 over 20 episodes). Its cost is the env frames of all members together
  at that point (``population.json``'s ``reached_at``).
* **fixed**: ``--quantile 0``, the same members, never copied: each trains until it reaches the target or its
  budget (``stop.env_frames``). A fixed member's cost is its own frames to the target; an unreached target
  counts as more than the budget. The fixed population's total is its members' frames together when the first
  of them reaches the target (they train side by side, as PBT's do). It trains in one segment (`--ready` = the budget): nothing is copied, so
  stopping every R frames would only add restarts.

The issue's test is that the population reaches the target in fewer total frames than the median fixed member.
Members run at the same time as processes (threads launcher inside each); the 1-minute load average is printed
beside each run. The lineage PNG of each PBT run is written into its tune directory.

    python benchmarks/pbt.py [--population 4] [--ready 8192] [--budget 200000] [--seeds 0 1 2]
                             [--lr 1e-5 1e-1] [--preset cartpole-ppo] [--out DIR] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from menger.tuning.pbt import train_population  # noqa: E402

COLUMNS = ("seed", "PBT total frames", "PBT best member", "fixed: each member's frames to target",
           "fixed median", "PBT < median", "fixed population total", "PBT s", "fixed s", "load")


def run(preset: str, out: Path, size: int, ready: int, budget: int, seed: int, lr: tuple[float, float],
        quantile: float, extra: list[str]) -> dict:
    overrides = ["runtime.launcher=threads", "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0",
                 f"stop.env_frames={budget}", f"tune={{ppo.lr: {{log_uniform: [{lr[0]}, {lr[1]}]}}}}", *extra]
    started = time.monotonic()
    result = train_population(preset, out, size, overrides, ready=ready, quantile=quantile, seed=seed,
                              executor="processes", echo=lambda line: None)
    return {"members": [{"id": m.id, "values": m.values, "frames": m.frames, "status": m.status, "score": m.score}
                        for m in result.members],
            "reached_at": result.reached_at, "seconds": time.monotonic() - started, "load": os.getloadavg()[0],
            "out": str(out)}


def frames_to_target(member: dict) -> float:
    return member["frames"] if member["status"] == "target" else float("inf")


def row(seed: int, pbt: dict, fixed: dict, budget: int) -> dict:
    each = sorted(frames_to_target(m) for m in fixed["members"])
    median = statistics.median(each)
    total = pbt["reached_at"] if pbt["reached_at"] is not None else float("inf")
    best = max(pbt["members"], key=lambda m: (m["status"] == "target", m["score"] or 0))
    # the fixed members train side by side too: when the first reaches the target, each has spent that many frames
    fixed_total = len(each) * each[0]
    return {"seed": seed, "pbt_total": total, "pbt_best": best, "fixed_each": each, "fixed_median": median,
            "fixed_total": fixed_total,
            "wins": total < median, "pbt_s": pbt["seconds"], "fixed_s": fixed["seconds"],
            "load": (pbt["load"] + fixed["load"]) / 2, "budget": budget, "size": len(pbt["members"]), "lineage": str(Path(pbt["out"]) / "lineage.png")}


def _frames(value: float, budget: int) -> str:
    return f">{budget / 1000:g}k" if value == float("inf") else f"{value / 1000:.0f}k"


def print_table(rows: list[dict]) -> None:
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for r in rows:
        best = r["pbt_best"]
        lr = ", ".join(f"{k} {v:.3g}" for k, v in best["values"].items())
        print(f"| {r['seed']} | {_frames(r['pbt_total'], r['budget'] * r['size'])} | {best['frames'] / 1000:.0f}k ({lr}) | "
              f"{', '.join(_frames(v, r['budget']) for v in r['fixed_each'])} | "
              f"{_frames(r['fixed_median'], r['budget'])} | {'yes' if r['wins'] else 'no'} | "
              f"{_frames(r['fixed_total'], r['budget'] * r['size'])} | {r['pbt_s']:.0f} | "
              f"{r['fixed_s']:.0f} | {r['load']:.2f} |")
    wins = sum(r["wins"] for r in rows)
    print(f"PBT reached the target in fewer total frames than the median fixed member in {wins} of {len(rows)} "
          f"population seeds; lineage PNGs: {', '.join(r['lineage'] for r in rows)}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cartpole-ppo")
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--ready", type=int, default=8192)
    parser.add_argument("--budget", type=int, default=200_000, help="stop.env_frames of each member")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lr", type=float, nargs=2, default=[1e-5, 1e-1])
    parser.add_argument("--out", help="where the tune directories go (default: a temporary directory)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="menger-pbt-"))
    rows = []
    for seed in args.seeds:
        pbt = run(args.preset, root / f"pbt-{seed}", args.population, args.ready, args.budget, seed, tuple(args.lr),
                  0.25, args.overrides)
        # never copied, so one segment each: the same runs, without a restart every --ready frames
        fixed = run(args.preset, root / f"fixed-{seed}", args.population, args.budget, args.budget, seed,
                    tuple(args.lr), 0.0, args.overrides)
        rows.append(row(seed, pbt, fixed, args.budget))
        print(f"seed {seed}: PBT {pbt['reached_at']} frames in all ({pbt['seconds']:.0f} s), fixed members "
              f"{[frames_to_target(m) for m in fixed['members']]} ({fixed['seconds']:.0f} s)", flush=True)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))
    return rows


if __name__ == "__main__":
    main()
