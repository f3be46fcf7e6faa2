"""Off-policy time to solve: Menger's `cartpole-apex` and `pendulum-sac` against Stable-Baselines3, same machine.

Two tasks, each side trained per seed until a deterministic evaluation of 10 episodes reaches the target:

* **CartPole-v1** (target 475): ``menger train cartpole-apex`` against SB3's DQN with rl-baselines3-zoo's
  CartPole-v1 hyperparameters (hyperparams/dqn.yml: lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000,
  gamma 0.99, target_update_interval 10, train_freq 256, gradient_steps 128, exploration_fraction 0.16,
  exploration_final_eps 0.04, net_arch [256, 256]; zoo budget 5e4 steps);
* **Pendulum-v1** (target -250): ``menger train pendulum-sac`` against SB3's SAC with the zoo's Pendulum-v1
  settings (hyperparams/sac.yml: lr 1e-3, the rest SB3's defaults; zoo budget 20k steps).

The figure is the same on both sides: **training wall-clock seconds, evaluation time excluded, until the
criterion is first met**, and the env steps at that point.

* **Menger**: the CLI runs as a subprocess per seed, as a user types it,
  ``<python> -m menger.cli train PRESET --set runtime.seed=S --no-progress --run-dir DIR`` (the preset's own
  evaluation and stop rule). The figure is ``time/wall_s - eval/time_s`` of the first record in the run's
  ``metrics.jsonl`` whose ``eval/return_mean`` (the latest deterministic evaluation) is at least the target;
  the steps are its ``time/env_frames``. The trainer's clock starts as it starts the actors.
* **SB3**: in a separate venv (``--peer-python``; Menger never depends on SB3), this script re-invokes itself
  with a hidden ``--sb3-worker`` mode that prints one JSON line. A callback runs 10 deterministic episodes on
  separate envs every E env steps (E = 1000 CartPole, 500 Pendulum; ``--eval-every``), stops training at the
  first one that reaches the target, and the seconds it spent evaluating are subtracted from the clock, which
  starts when ``learn`` starts training (building the model is left out, as building Menger's learner is).
  SB3 is single-process; it gets ``torch.set_num_threads(2)``, both cores of this machine, as Menger's
  processes together do.

Both evaluate the same 10 episodes each time (env seeds 10000..10009; Menger's ``eval.seed`` is 10000) but
at different moments: Menger every ``eval.interval_s`` seconds of training, SB3 every E steps, so each
figure is late by up to one evaluation interval. A side that does not reach the target within twice the
zoo's step budget (100k steps CartPole, 40k Pendulum; ``--budget``) is reported with its best evaluation and
its training seconds over the budget. SB3 stops there; a Menger run stops by its preset's rules, only its
records within the budget count, and a later reach is shown beside it as over budget.

    python benchmarks/offpolicy.py [--tasks cartpole pendulum] [--sides menger sb3] [--seeds 1 2 3]
                                   [--eval-every [TASK=]N] [--budget [TASK=]N] [--target [TASK=]X]
                                   [--python PY] [--peer-python PY] [--set KEY=VALUE ...] [--keep DIR]
                                   [--json out.json]

Seeds run one after the other, the two sides alternating per seed. Each task's table ends with the medians
(a seed that never got there counts as infinitely slow), the ratio SB3 / Menger and the issue's targets
(Menger 3x faster on CartPole, 2x on Pendulum); the 1-minute load average is printed at the start and the
end: on shared cores all these seconds move with other work. The peers' venv (``benchmarks/README.md``)::

    python3 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install torch==2.13.0          # first: the CPU wheel, so pip resolves no other
    /work/bench-venv/bin/pip install -r benchmarks/requirements-peers.txt

This file imports only the standard library at the top, so that it runs under either interpreter.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PEER_PYTHON = "/work/bench-venv/bin/python"
EVAL_EPISODES = 10
EVAL_SEED = 10_000  # as Menger's eval.seed: the same episodes at every evaluation
SB3_THREADS = 2


@dataclass(frozen=True)
class Task:
    name: str
    env_id: str
    preset: str  # Menger's
    target: float
    eval_every: int  # SB3: env steps between evaluations
    budget: int  # env steps: twice rl-zoo's n_timesteps
    target_ratio: float  # the issue's: SB3 seconds / Menger seconds at least this
    sb3_algo: str
    sb3_kwargs: dict = field(default_factory=dict)


TASKS = {
    "cartpole": Task("cartpole", "CartPole-v1", "cartpole-apex", 475.0, 1000, 100_000, 3.0, "DQN", dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
        target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
        exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]))),
    "pendulum": Task("pendulum", "Pendulum-v1", "pendulum-sac", -250.0, 500, 40_000, 2.0, "SAC", dict(
        learning_rate=1e-3)),
}


class ContractError(RuntimeError):
    """A Menger run's metrics.jsonl lacks what this benchmark reads."""


# ----- Menger: the CLI as a subprocess, read back from metrics.jsonl ---------------------------------------------

def read_records(metrics_path: Path) -> list[dict]:
    if not metrics_path.is_file():
        raise ContractError(f"{metrics_path} was not written")
    return [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def menger_figures(records: list[dict], target: float, budget: int) -> dict:
    """Seconds of training (evaluation excluded) and env frames to the first evaluation at or above `target`.

    Every record must hold ``time/wall_s`` and ``time/env_frames``; a record with ``eval/return_mean`` must
    also hold ``eval/time_s`` (cumulative evaluation seconds), and at least one record must have evaluated.
    Only records within `budget` env frames count; a reach after it is returned as ``over_budget``."""
    if not records:
        raise ContractError("metrics.jsonl holds no record")
    for number, record in enumerate(records, 1):
        missing = [k for k in ("time/wall_s", "time/env_frames") if k not in record]
        if "eval/return_mean" in record and "eval/time_s" not in record:
            missing.append("eval/time_s")
        if missing:
            raise ContractError(f"record {number} of metrics.jsonl has no {', '.join(missing)} (keys: "
                                f"{', '.join(sorted(record)) or 'none'}); this benchmark needs time/wall_s, "
                                "time/env_frames, and eval/time_s beside every eval/return_mean")
    if not any("eval/return_mean" in r for r in records):
        raise ContractError("no record of metrics.jsonl has eval/return_mean: the run never evaluated (is the "
                            "preset's eval.interval_s on, and did it train for longer than one interval?)")

    def train_s(record: dict) -> float:
        return float(record["time/wall_s"]) - float(record.get("eval/time_s", 0.0))

    evals, seen = [], set()  # one entry per evaluation: records repeat the latest one until the next
    for record in records:
        if "eval/return_mean" in record and float(record["eval/time_s"]) not in seen:
            seen.add(float(record["eval/time_s"]))
            score = record["eval/return_mean"]
            evals.append([int(record["time/env_frames"]), round(train_s(record), 3),
                          float(score) if _finite(score) else None])  # NaN: no episode finished
    reach = next((r for r in records if _finite(r.get("eval/return_mean")) and r["eval/return_mean"] >= target),
                 None)
    within = [r for r in records if int(r["time/env_frames"]) <= budget] or records[:1]
    scores = [r["eval/return_mean"] for r in within if _finite(r.get("eval/return_mean"))]
    reached = reach is not None and int(reach["time/env_frames"]) <= budget
    return {"reached": reached,
            "train_s": train_s(reach) if reached else None,
            "steps": int(reach["time/env_frames"]) if reached else None,
            "best_eval": max(scores) if scores else None,
            "final_train_s": train_s(within[-1]), "final_steps": int(within[-1]["time/env_frames"]),
            "over_budget": None if reach is None or reached else
            {"train_s": train_s(reach), "steps": int(reach["time/env_frames"])},
            "evals": evals}


def menger_command(python: str, preset: str, seed: int, run_dir: Path, overrides: list[str]) -> list[str]:
    command = [python, "-m", "menger.cli", "train", preset, "--set", f"runtime.seed={seed}", "--no-progress",
               "--run-dir", str(run_dir)]
    for override in overrides:
        command += ["--set", override]
    return command


def check_menger(python: str, presets: list[str]) -> None:
    """Fail before anything trains when `python` has no Menger or lacks a preset."""
    done = subprocess.run([python, "-m", "menger.cli", "presets"], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"`{python} -m menger.cli presets` failed ({done.returncode}); is Menger installed in that "
                         f"interpreter (--python)?\n{done.stderr[-2000:]}")
    names = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    missing = [p for p in presets if p not in names]
    if missing:
        raise SystemExit(f"Menger ({python}) has no preset {', '.join(missing)}; `menger presets` lists "
                         f"{', '.join(sorted(names))}")


def run_menger(task: Task, seed: int, python: str, overrides: list[str], root: Path, timeout_s: float) -> dict:
    run_dir = root / f"{task.preset}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    if run_dir.exists():  # Menger appends to a run directory's metrics.jsonl: never mix two runs
        raise RuntimeError(f"{run_dir} exists already")
    command = menger_command(python, task.preset, seed, run_dir, overrides)
    log_path = run_dir.with_name(run_dir.name + ".log")  # the command's output, beside its run directory
    started = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:
        try:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`{' '.join(command)}` ran for more than {timeout_s:g} s (--menger-timeout); its "
                               f"output: {log_path}") from None
    command_s = time.perf_counter() - started
    if done.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {done.returncode}:\n{tail}")
    try:
        figures = menger_figures(read_records(run_dir / "metrics.jsonl"), task.target, task.budget)
    except ContractError as error:
        raise ContractError(f"{task.preset}, seed {seed} ({run_dir}): {error}") from None
    return {**figures, "command_s": command_s, "command": command, "load": os.getloadavg()[0]}


# ----- SB3: this file under the peers' interpreter -----------------------------------------------------------------

def run_sb3(task: Task, seed: int, peer_python: str) -> dict:
    spec = {"task": task.name, "seed": seed, "target": task.target, "eval_every": task.eval_every,
            "budget": task.budget}
    command = [peer_python, str(Path(__file__).resolve()), "--sb3-worker", json.dumps(spec)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)  # its progress lines go to our stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the SB3 worker (`{' '.join(command)}`) failed with exit status {done.returncode}")
    return {**json.loads(lines[-1]), "load": os.getloadavg()[0]}


def check_peer(peer_python: str) -> None:
    if not Path(peer_python).is_file():
        raise SystemExit(f"no peer interpreter at {peer_python} (--peer-python). Make the peers' venv:\n"
                         "    python3 -m venv /work/bench-venv\n"
                         "    /work/bench-venv/bin/pip install torch==2.13.0   # first: the CPU wheel\n"
                         "    /work/bench-venv/bin/pip install -r benchmarks/requirements-peers.txt\n"
                         "or run Menger's side alone with --sides menger")
    done = subprocess.run([peer_python, "-c", "import stable_baselines3, gymnasium, torch"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"{peer_python} cannot import stable_baselines3, gymnasium and torch "
                         f"(see benchmarks/requirements-peers.txt):\n{done.stderr[-2000:]}")


def sb3_worker(spec: dict) -> dict:
    """Train one SB3 seed, evaluating every `eval_every` steps; runs under the peers' interpreter."""
    import gymnasium as gym
    import numpy as np
    import stable_baselines3
    import torch
    from stable_baselines3 import DQN, SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(SB3_THREADS)
    task = TASKS[spec["task"]]
    target, every, budget, seed = float(spec["target"]), int(spec["eval_every"]), int(spec["budget"]), spec["seed"]
    eval_envs = [gym.make(task.env_id) for _ in range(EVAL_EPISODES)]

    def evaluate(model) -> float:
        """EVAL_EPISODES episodes side by side, one per env, deterministic actions, seeds EVAL_SEED + i."""
        obs = np.stack([env.reset(seed=EVAL_SEED + i)[0] for i, env in enumerate(eval_envs)])
        returns, running = np.zeros(len(eval_envs)), np.ones(len(eval_envs), bool)
        while running.any():
            actions, _ = model.predict(obs, deterministic=True)
            for i in np.flatnonzero(running):
                obs[i], reward, terminated, truncated, _ = eval_envs[i].step(actions[i])
                returns[i] += reward
                running[i] = not (terminated or truncated)
        return float(returns.mean())

    class EvalEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.eval_s, self.evals, self.reached = 0.0, [], None

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def train_s(self) -> float:
            return time.perf_counter() - self.start - self.eval_s

        def _on_step(self) -> bool:
            if self.num_timesteps % every:
                return True
            train_s, started = self.train_s(), time.perf_counter()
            score = evaluate(self.model)
            self.eval_s += time.perf_counter() - started
            self.evals.append([self.num_timesteps, round(train_s, 3), score])
            print(f"sb3 {task.name} seed {seed}: {self.num_timesteps:>7,} steps  {train_s:7.1f} s  eval {score:8.1f}",
                  file=sys.stderr, flush=True)
            if score >= target:
                self.reached = (train_s, self.num_timesteps)
                return False
            return True

    env = gym.make(task.env_id)
    algo = {"DQN": DQN, "SAC": SAC}[task.sb3_algo]
    model = algo("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **task.sb3_kwargs)
    callback = EvalEvery()
    model.learn(total_timesteps=budget, callback=callback)
    final_train_s = callback.train_s()
    scores = [score for _, _, score in callback.evals]
    return {"reached": callback.reached is not None,
            "train_s": callback.reached[0] if callback.reached else None,
            "steps": callback.reached[1] if callback.reached else None,
            "best_eval": max(scores) if scores else None,
            "final_train_s": final_train_s, "final_steps": int(model.num_timesteps), "eval_s": callback.eval_s,
            "evals": callback.evals, "threads": torch.get_num_threads(),
            "versions": {"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__,
                         "gymnasium": gym.__version__, "numpy": np.__version__}}


# ----- the report ------------------------------------------------------------------------------------------------

def median_or_none(values: list[float | None]) -> float | None:
    """Median over all seeds; a seed that never reached the target counts as infinitely slow."""
    if not values:
        return None
    middle = statistics.median([math.inf if v is None else v for v in values])
    return None if middle == math.inf else middle


def _cell(result: dict | None) -> tuple[str, str]:
    """(seconds, steps) columns of one side's seed."""
    if result is None:
        return "-", "-"
    if result["reached"]:
        return f"{result['train_s']:.1f}", f"{result['steps']:,}"
    best = "none" if result["best_eval"] is None else f"{result['best_eval']:.1f}"
    return f"no ({result['final_train_s']:.1f} s, best {best})", f"{result['final_steps']:,}"


def _ratio(sb3: float | None, menger: float | None) -> str:
    return "-" if sb3 is None or menger is None or menger <= 0 else f"{sb3 / menger:.2f}"


def summarize(task: Task, runs: dict[int, dict]) -> dict:
    sides = {side: [r[side] for r in runs.values() if r.get(side) is not None] for side in ("menger", "sb3")}
    medians = {side: {"train_s": median_or_none([r["train_s"] for r in results]),
                      "steps": median_or_none([r["steps"] for r in results])} if results else None
               for side, results in sides.items()}
    ratio, met, why = None, None, "not measured: run both sides"
    if medians["menger"] and medians["sb3"]:
        menger_s, sb3_s = medians["menger"]["train_s"], medians["sb3"]["train_s"]
        if menger_s is None:
            met, why = False, "NOT met: Menger's median seed did not reach the target"
        elif sb3_s is None:
            met, why = True, "met: SB3's median seed did not reach the target within the budget"
        else:
            ratio = sb3_s / menger_s
            met, why = ratio >= task.target_ratio, "met" if ratio >= task.target_ratio else "NOT met"
    return {"medians": medians, "ratio_sb3_over_menger": ratio, "target_ratio": task.target_ratio,
            "target_met": met, "verdict": why}


def report(task: Task, runs: dict[int, dict], summary: dict) -> str:
    lines = [f"{task.env_id}: training s (evaluation excluded) to a deterministic {EVAL_EPISODES}-episode mean of "
             f"{task.target:g}, at most {task.budget:,} env steps",
             f"menger: {task.preset}; sb3: {task.sb3_algo} (rl-zoo settings, evaluated every {task.eval_every:,} "
             f"steps, {SB3_THREADS} threads). 'no (S s, best B)': not reached; S = training s over the budget", "",
             f"{'seed':>6}  {'menger s':>26}  {'steps':>9}  {'sb3 s':>26}  {'steps':>9}  {'sb3/menger':>10}  "
             f"{'load':>5}"]
    for seed, run in runs.items():
        menger, sb3 = run.get("menger"), run.get("sb3")
        (ms, mf), (ss, sf) = _cell(menger), _cell(sb3)
        ratio = _ratio(sb3 and sb3["train_s"], menger and menger["train_s"])
        load = max(r["load"] for r in (menger, sb3) if r is not None)
        lines.append(f"{seed:>6}  {ms:>26}  {mf:>9}  {ss:>26}  {sf:>9}  {ratio:>10}  {load:>5.2f}")
        if menger is not None and menger["over_budget"]:
            over = menger["over_budget"]
            lines.append(f"{'':>6}  menger reached it over the budget: {over['train_s']:.1f} s, "
                         f"{over['steps']:,} steps")
    med = summary["medians"]

    def median_cells(side: str) -> tuple[str, str]:
        if med[side] is None:
            return "-", "-"
        s, f = med[side]["train_s"], med[side]["steps"]
        return ("not reached" if s is None else f"{s:.1f}"), ("-" if f is None else f"{f:,.0f}")

    (ms, mf), (ss, sf) = median_cells("menger"), median_cells("sb3")
    ratio = summary["ratio_sb3_over_menger"]
    ratio_text = "-" if ratio is None else f"{ratio:.2f}"
    lines += [f"{'median':>6}  {ms:>26}  {mf:>9}  {ss:>26}  {sf:>9}  {ratio_text:>10}", "",
              f"sb3/menger of the medians: {ratio_text}  (target {task.target_ratio:g}: Menger "
              f"{task.target_ratio:g}x faster; {summary['verdict']})"]
    return "\n".join(lines)


# ----- command line ----------------------------------------------------------------------------------------------

def per_task(values: list[str], tasks: list[str], name: str, kind) -> dict[str, object]:
    """`--NAME N` (every task) or `--NAME TASK=N`, repeatable."""
    out: dict[str, object] = {}
    for value in values:
        task, sep, number = value.rpartition("=")
        names = [task] if sep else tasks
        for t in names:
            if t not in TASKS:
                raise SystemExit(f"--{name} {value}: no task {t!r} (tasks: {', '.join(TASKS)})")
            try:
                out[t] = kind(float(number)) if kind is int else kind(number)
            except ValueError:
                raise SystemExit(f"--{name} {value}: {number!r} is not a number") from None
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--sides", nargs="+", choices=["menger", "sb3"], default=["menger", "sb3"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--eval-every", action="append", default=[], metavar="[TASK=]N",
                        help="SB3: env steps between evaluations (default cartpole=1000, pendulum=500)")
    parser.add_argument("--budget", action="append", default=[], metavar="[TASK=]N",
                        help="env steps before a side counts as not reaching the target (default twice rl-zoo's: "
                             "cartpole=100000, pendulum=40000)")
    parser.add_argument("--target", action="append", default=[], metavar="[TASK=]X",
                        help="evaluation mean return to reach (default cartpole=475, pendulum=-250); Menger's stop "
                             "rule stays the preset's unless you --set stop.target_return too")
    parser.add_argument("--python", default=sys.executable, help="interpreter with Menger (default: this one)")
    parser.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON,
                        help=f"interpreter with stable-baselines3 (default {DEFAULT_PEER_PYTHON})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="passed on to every `menger train --set` (repeatable)")
    parser.add_argument("--menger-timeout", type=float, default=1800.0, help="seconds before a Menger run is "
                        "called failed (default 1800)")
    parser.add_argument("--keep", type=Path, help="keep Menger's run directories (and each command's output, "
                        "RUN.log) under this folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--sb3-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.sb3_worker:
        print(json.dumps(sb3_worker(json.loads(args.sb3_worker))), flush=True)
        return {}

    changes = {"eval_every": per_task(args.eval_every, args.tasks, "eval-every", int),
               "budget": per_task(args.budget, args.tasks, "budget", int),
               "target": per_task(args.target, args.tasks, "target", float)}
    tasks = [Task(**{**TASKS[name].__dict__, **{k: v[name] for k, v in changes.items() if name in v}})
             for name in args.tasks]
    if "menger" in args.sides:
        check_menger(args.python, [task.preset for task in tasks])
    if "sb3" in args.sides:
        check_peer(args.peer_python)

    load_start = os.getloadavg()[0]
    print(f"load average (1 min) at the start: {load_start:.2f}; {os.cpu_count()} CPUs", flush=True)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="menger-offpolicy-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            runs: dict[int, dict] = {}
            for seed in args.seeds:
                runs[seed] = {}
                for side in args.sides:  # alternating, so that both sides see the same minutes of the machine
                    try:
                        if side == "menger":
                            result = run_menger(task, seed, args.python, args.overrides, root, args.menger_timeout)
                        else:
                            result = run_sb3(task, seed, args.peer_python)
                    except (ContractError, RuntimeError) as error:
                        raise SystemExit(f"{task.name} seed {seed} {side}: {error}") from None
                    runs[seed][side] = result
                    if result["reached"]:
                        line = f"{result['train_s']:.1f} s of training to {task.target:g}, {result['steps']:,} steps"
                    else:
                        line = (f"not reached in {result['final_steps']:,} steps ({result['final_train_s']:.1f} s of "
                                f"training, best evaluation {result['best_eval']})")
                    print(f"{task.name} seed {seed} {side}: {line}", flush=True)
            summary = summarize(task, runs)
            print()
            print(report(task, runs, summary))
            print(flush=True)
            results[task.name] = {"task": {k: v for k, v in task.__dict__.items()}, "runs": runs, **summary}
    load_end = os.getloadavg()[0]
    print(f"load average (1 min): {load_start:.2f} at the start, {load_end:.2f} at the end")
    out = {"tasks": results, "seeds": args.seeds, "sides": args.sides, "load_average": [load_start, load_end],
           "cpus": os.cpu_count(), "python": args.python, "peer_python": args.peer_python}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
