"""Stable-Baselines3 on a `menger bench` suite, at the same budgets and evaluations, in the same sitting.

`menger bench SUITE --algo A` puts each generic preset beside published numbers, mostly measured at other budgets
(rl-zoo's runs of 1M frames where the suite affords 100k). This script gives the other reference the issue asks
for: SB3's same algorithm, as a user gets it (`PPO("MlpPolicy", env)`: the library's defaults, one env, no
VecNormalize), trained on the same envs for the same frames, evaluated the same way:

* each cell (env x seed) trains `ALGO("MlpPolicy", gym.make(env), seed=seed)` for the suite's frame budget (times
  `--frames-scale`), under the peers' interpreter (`--peer-python`; Menger never depends on SB3);
* every budget / `evaluations` env steps (20 unless the suite says, as the bench's `eval.interval_frames`) and at
  the end, 10 deterministic episodes on their own envs reset with seeds 10000..10009 (Menger's `eval.seed`);
* final = the last evaluation, best = the highest; the table gives their mean and the bootstrap interval over seeds
  exactly as `menger bench` does, and, where `OUT/SUITE/ALGO/table.json` exists (the generic preset's run),
  Menger's final beside it and the ratio (Menger - random) / (SB3 - random).

The SB3 algorithm of each generic preset: ppo -> PPO, a3c -> A2C (the synchronous A3C), apex -> DQN, sac -> SAC.
Cells go to `OUT/SUITE/sb3-ALGO/ENV/seedK/result.json`, one after another; a cell with a result is not trained
again, so a killed run goes on where it stopped.

    python benchmarks/suite_peers.py SUITE --algo A [--seeds N] [--envs ID ...] [--out runs/bench]
                                     [--frames-scale X] [--peer-python /work/bench-venv/bin/python]

The peers' venv is `benchmarks/requirements-peers.txt` (the suites' env packages, Box2D or MuJoCo, go into it
too for those suites). Single-agent envs with Box observations only; the 1-minute load is printed per cell.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SB3_ALGOS = {"ppo": "PPO", "a3c": "A2C", "apex": "DQN", "sac": "SAC"}
ACTS_IN = {"PPO": ("discrete", "continuous"), "A2C": ("discrete", "continuous"), "DQN": ("discrete",),
           "SAC": ("continuous",)}
EVAL_EPISODES, EVAL_SEED, SB3_THREADS = 10, 10000, 1
DEFAULT_PEER = "/work/bench-venv/bin/python"


# ----- the worker, under the peers' interpreter --------------------------------------------------------------------
def sb3_worker(spec: dict) -> dict:
    """Train one SB3 cell, evaluating every `interval` steps and at the end; prints nothing but progress."""
    import importlib

    import gymnasium as gym
    import numpy as np
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(SB3_THREADS)
    for name in spec["imports"]:  # what registers the id ("module" or "module:function")
        module_name, _, function = name.partition(":")
        module = importlib.import_module(module_name)
        if function:
            getattr(module, function)()
    env_id, seed, budget, interval = spec["env"], spec["seed"], spec["frames"], spec["interval"]
    eval_envs = [gym.make(env_id) for _ in range(EVAL_EPISODES)]

    def evaluate(model) -> float:
        returns = []
        for i, env in enumerate(eval_envs):
            obs, _ = env.reset(seed=EVAL_SEED + i)
            total, done = 0.0, False
            while not done:
                action, _ = model.predict(obs, deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        return float(np.mean(returns))

    class EvalEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.curve, self.eval_s, self.next_at = [], 0.0, interval

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_at:
                self.next_at += interval
                started = time.perf_counter()
                self.curve.append([int(self.num_timesteps), evaluate(self.model)])
                self.eval_s += time.perf_counter() - started
            return True

    algo = getattr(stable_baselines3, spec["sb3_algo"])
    model = algo("MlpPolicy", gym.make(env_id), seed=seed, device="cpu", verbose=0)
    callback, started = EvalEvery(), time.perf_counter()
    model.learn(total_timesteps=budget, callback=callback)
    wall_s = time.perf_counter() - started
    if not callback.curve or callback.curve[-1][0] != model.num_timesteps:
        callback.curve.append([int(model.num_timesteps), evaluate(model)])
    curve = callback.curve
    return {"env": env_id, "seed": seed, "status": "done", "final_return": curve[-1][1],
            "best_return": max(r for _, r in curve), "frames": int(model.num_timesteps),
            "wall_s": wall_s - callback.eval_s, "curve": curve, "sb3_algo": spec["sb3_algo"],
            "versions": {"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__,
                         "gymnasium": gym.__version__}}


# ----- the driver, under Menger's interpreter ----------------------------------------------------------------------
def run_cell(peer_python: str, spec: dict, path: Path) -> dict:
    command = [peer_python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        result = {"env": spec["env"], "seed": spec["seed"], "status": "failed",
                  "reason": f"the SB3 worker exited with status {done.returncode}"}
    else:
        result = json.loads(lines[-1])
    result["load"] = os.getloadavg()[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result), encoding="utf-8")
    return result


def peer_rows(suite, algo: str, results: list[dict], menger_rows: dict) -> list[dict]:
    """`menger bench`'s rows for the SB3 cells (SB3 as the row, no published reference), with Menger beside."""
    from menger.commands.bench import ratio, table_rows

    rows = table_rows(suite, algo, results)
    for row in rows:
        ours = menger_rows.get(row["env"])
        row["menger_final_mean"] = ours["final_mean"] if ours else None
        row["menger_final_ci"] = ours["final_ci"] if ours else None
        value, kind = (None, "")
        if ours and ours["final_mean"] is not None and row["final_mean"] is not None:
            value, kind = ratio(ours["final_mean"], row["final_mean"], row["random"])
        row["ratio"], row["ratio_kind"] = value, kind or None
    return rows


def format_rows(suite_name: str, algo: str, sb3_algo: str, rows: list[dict], command: str) -> str:
    def num(x):
        if x is None:
            return "–"
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}" if abs(x) >= 1 else f"{x:.2f}"

    def cell(mean, ci):
        return "–" if mean is None else f"{num(mean)} [{num(ci[0])}, {num(ci[1])}]"

    lines = [f"# {suite_name}: Menger's generic `{algo}` beside SB3 {sb3_algo} (defaults), same budgets", "",
             f"`{command}`", "",
             "| env | seeds | SB3 final | SB3 best | frames | SB3 wall s | random | Menger final | ratio |",
             "| --- | ---: | --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        if r.get("skipped") or not r["seeds"]:
            continue
        ratio_text = "–" if r["ratio"] is None else f"{r['ratio']:.2f}"
        if r["ratio_kind"] == "reference at random":
            ratio_text = "– (SB3 at random)"
        lines.append(f"| {r['env']} | {len(r['seeds'])} | {cell(r['final_mean'], r['final_ci'])} | "
                     f"{cell(r['best_mean'], r['best_ci'])} | {int(r['frames_median']):,} | {r['wall_s_median']:.0f} | "
                     f"{num(r['random'])} | {cell(r['menger_final_mean'], r['menger_final_ci'])} | {ratio_text} |")
    lines += ["", "ratio: (Menger's mean final - random) / (SB3's mean final - random); Menger's finals are "
              f"OUT/SUITE/{algo}/table.json's, run by `menger bench` with the generic preset."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?")
    parser.add_argument("--algo", choices=sorted(SB3_ALGOS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--envs", nargs="*", default=[])
    parser.add_argument("--out", default="runs/bench")
    parser.add_argument("--frames-scale", type=float, default=1.0)
    parser.add_argument("--peer-python", default=DEFAULT_PEER)
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(sb3_worker(json.loads(args.worker))), flush=True)
        return {}
    if not args.suite or not args.algo:
        parser.error("give a SUITE and --algo")
    from menger.commands.bench import env_slug, load_suite

    suite, sb3_algo = load_suite(args.suite), SB3_ALGOS[args.algo]
    out = Path(args.out) / suite.name / f"sb3-{args.algo}"
    entries = [suite.entry(env) for env in args.envs] if args.envs else list(suite.entries)
    print(f"load {os.getloadavg()[0]:.2f}; SB3 {sb3_algo} under {args.peer_python}", flush=True)
    results = []
    for entry in entries:
        for seed in range(1, args.seeds + 1):
            if entry.multiagent or entry.action not in ACTS_IN[sb3_algo]:
                results.append({"env": entry.id, "seed": seed, "status": "skipped",
                                "reason": f"SB3 {sb3_algo} does not train {entry.action} or multi-agent envs"})
                continue
            path = out / env_slug(entry.id) / f"seed{seed}" / "result.json"
            if path.is_file() and json.loads(path.read_text()).get("status") == "done":
                results.append(json.loads(path.read_text()))
                continue
            frames = max(1, int(entry.budget(args.algo) * args.frames_scale))
            spec = {"env": entry.id, "seed": seed, "frames": frames, "sb3_algo": sb3_algo,
                    "interval": max(1, frames // suite.evaluations), "imports": list(entry.imports)}
            result = run_cell(args.peer_python, spec, path)
            results.append(result)
            shown = (f"final {result['final_return']:.4g}, best {result['best_return']:.4g}, "
                     f"{result['wall_s']:.0f} s" if result["status"] == "done" else result["reason"])
            print(f"{entry.id} seed {seed}: {shown} (load {result['load']:.2f})", flush=True)
    menger_table = Path(args.out) / suite.name / args.algo / "table.json"
    menger_rows = {r["env"]: r for r in json.loads(menger_table.read_text())["rows"]} if menger_table.is_file() \
        else {}
    rows = peer_rows(suite, args.algo, results, menger_rows)
    command = "python benchmarks/suite_peers.py " + " ".join(sys.argv[1:] if argv is None else argv)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(format_rows(suite.name, args.algo, sb3_algo, rows, command), encoding="utf-8")
    (out / "table.json").write_text(json.dumps({"suite": suite.name, "algo": f"sb3-{args.algo}", "rows": rows}),
                                    encoding="utf-8")
    print((out / "table.md").read_text(), flush=True)
    return {"rows": rows, "table": out / "table.md"}


if __name__ == "__main__":
    main()
