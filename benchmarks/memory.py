"""Memory: CartPole without its velocities (menger/CartPoleNoVel-v0) with R2D2, against sb3-contrib's RecurrentPPO
and against Menger's own feed-forward Ape-X on the same env, same machine, in one sitting.

Three sides, each trained per seed until a deterministic evaluation of 10 episodes (its recurrent state carried
through each episode) reaches 475:

* **menger-r2d2**: ``menger train cartpole-novel-r2d2`` as a subprocess (``benchmarks/offpolicy.py``'s runner:
  training seconds with evaluation excluded, read from the run's ``metrics.jsonl``);
* **apex**: ``menger train cartpole-apex --set env.id=menger/CartPoleNoVel-v0`` for ``--apex-seconds`` (60):
  the feed-forward agent with the same replay, which memory is the only difference from;
* **recurrent-ppo**: sb3-contrib's RecurrentPPO with rl-baselines3-zoo's CartPoleNoVel-v1 settings
  (hyperparams/ppo_lstm.yml: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, GAE 0.8, lr and clip
  linear from 1e-3 and 0.2, no entropy bonus, VecNormalize of the observations, MlpLstmPolicy with an LSTM of
  64 for the actor and one for the critic, ReLU, no orthogonal init; zoo budget 1e5 steps, here twice that),
  in the peers' venv, evaluated every 2,048 steps on 10 separate envs (seeds 10000..10009, as Menger's), the
  observations normalised with the training statistics. It gets 2 torch threads, both cores, as Menger's
  processes together do. The peer env is rl-zoo's: CartPole-v1 with observation [x, theta] and the 500-step
  limit, which is what ``menger/CartPoleNoVel-v0`` is.

    python benchmarks/memory.py [--sides menger-r2d2 apex recurrent-ppo] [--seeds 1 2 3] [--apex-seconds 60]
                                [--peer-python PY] [--plot docs/images/cartpole-novel.png] [--json out.json]

Printed: per seed and side the training seconds and env steps to 475 (or the best evaluation when not reached),
the medians, the ratio RecurrentPPO / R2D2 of the median seconds (the issue's target: R2D2 takes less wall
clock), and the 1-minute load average. ``--plot`` draws every side's evaluation curve (return against training
seconds) for the first seed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from offpolicy import (ContractError, Task, _cell, check_menger, median_or_none, run_menger)

DEFAULT_PEER_PYTHON = "/work/bench-venv/bin/python"
TARGET, EVAL_EPISODES, EVAL_SEED, EVAL_EVERY, BUDGET, THREADS = 475.0, 10, 10_000, 2048, 200_000, 2
NOVEL = "menger/CartPoleNoVel-v0"

R2D2 = Task("cartpole-novel", NOVEL, "cartpole-novel-r2d2", TARGET, 0, BUDGET, 1.0, "RecurrentPPO")
APEX = Task("cartpole-novel-apex", NOVEL, "cartpole-apex", TARGET, 0, BUDGET, 1.0, "-")


def run_apex(seed: int, python: str, seconds: float, root: Path) -> dict:
    overrides = [f"env.id={NOVEL}", f"stop.wall_clock_s={seconds}"]
    return run_menger(APEX, seed, python, overrides, root, seconds * 4 + 120)


def run_peer(seed: int, peer_python: str) -> dict:
    command = [peer_python, str(Path(__file__).resolve()), "--peer-worker", json.dumps({"seed": seed})]
    import subprocess

    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the RecurrentPPO worker (`{' '.join(command)}`) failed with exit status {done.returncode}")
    return {**json.loads(lines[-1]), "load": os.getloadavg()[0]}


def peer_worker(seed: int) -> dict:
    """Train RecurrentPPO on rl-zoo's CartPoleNoVel-v1 settings; runs under the peers' interpreter."""
    import gymnasium as gym
    import numpy as np
    import sb3_contrib
    import torch
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    class CartPoleNoVel(CartPoleEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Box(self.observation_space.low[[0, 2]],
                                                    self.observation_space.high[[0, 2]], dtype=np.float32)

        def reset(self, **kwargs):
            obs, info = super().reset(**kwargs)
            return obs[[0, 2]], info

        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs[[0, 2]], reward, terminated, truncated, info

    def make():
        return gym.wrappers.TimeLimit(CartPoleNoVel(), max_episode_steps=500)

    torch.set_num_threads(THREADS)
    train_env = VecNormalize(make_vec_env(make, n_envs=8, seed=seed), norm_obs=True, norm_reward=False)
    eval_envs = [make() for _ in range(EVAL_EPISODES)]

    def evaluate(model) -> float:
        obs = np.stack([env.reset(seed=EVAL_SEED + i)[0] for i, env in enumerate(eval_envs)])
        returns, running = np.zeros(EVAL_EPISODES), np.ones(EVAL_EPISODES, bool)
        state, starts = None, np.ones(EVAL_EPISODES, bool)
        while running.any():
            actions, state = model.predict(train_env.normalize_obs(obs), state=state, episode_start=starts,
                                           deterministic=True)
            starts = np.zeros(EVAL_EPISODES, bool)
            for i in np.flatnonzero(running):
                obs[i], reward, terminated, truncated, _ = eval_envs[i].step(actions[i])
                returns[i] += reward
                running[i] = not (terminated or truncated)
        return float(returns.mean())

    class EvalEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.eval_s, self.evals, self.reached, self.next_at = 0.0, [], None, EVAL_EVERY

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def train_s(self) -> float:
            return time.perf_counter() - self.start - self.eval_s

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_at:
                return True
            self.next_at += EVAL_EVERY
            train_s, started = self.train_s(), time.perf_counter()
            score = evaluate(self.model)
            self.eval_s += time.perf_counter() - started
            self.evals.append([self.num_timesteps, round(train_s, 3), score])
            print(f"recurrent-ppo seed {seed}: {self.num_timesteps:>7,} steps  {train_s:7.1f} s  eval {score:6.1f}",
                  file=sys.stderr, flush=True)
            if score >= TARGET:
                self.reached = (train_s, self.num_timesteps)
                return False
            return True

    model = RecurrentPPO("MlpLstmPolicy", train_env, seed=seed, device="cpu", verbose=0, n_steps=32, batch_size=256,
                         gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                         learning_rate=lambda progress: 1e-3 * progress, clip_range=lambda progress: 0.2 * progress,
                         policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                                            enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])))
    callback = EvalEvery()
    model.learn(total_timesteps=BUDGET, callback=callback)
    scores = [score for _, _, score in callback.evals]
    return {"reached": callback.reached is not None,
            "train_s": callback.reached[0] if callback.reached else None,
            "steps": callback.reached[1] if callback.reached else None,
            "best_eval": max(scores) if scores else None, "final_train_s": callback.train_s(),
            "final_steps": int(model.num_timesteps), "eval_s": callback.eval_s, "evals": callback.evals,
            "versions": {"sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__}}


def plot(runs: dict, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    labels = {"menger-r2d2": "Menger R2D2 (cartpole-novel-r2d2)", "apex": "Menger Ape-X, feed-forward",
              "recurrent-ppo": "sb3-contrib RecurrentPPO (rl-zoo)"}
    for side, result in runs.items():
        points = [(s, r) for _, s, r in result["evals"] if r is not None]
        if points:
            axes.plot(*zip(*points), marker=".", label=labels[side])
    axes.axhline(TARGET, color="grey", linestyle=":", linewidth=1)
    axes.set_xlabel("training seconds (evaluation excluded)")
    axes.set_ylabel("deterministic evaluation return (10 episodes)")
    axes.set_title("CartPole without velocities: memory is what R2D2 learns")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sides", nargs="+", choices=["menger-r2d2", "apex", "recurrent-ppo"],
                        default=["menger-r2d2", "apex", "recurrent-ppo"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--apex-seconds", type=float, default=60.0, help="training seconds of the apex side")
    parser.add_argument("--python", default=sys.executable, help="interpreter with Menger (default: this one)")
    parser.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON, help="interpreter with sb3-contrib")
    parser.add_argument("--plot", type=Path, help="draw the first seed's evaluation curves into this PNG")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--peer-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer_worker:
        print(json.dumps(peer_worker(int(json.loads(args.peer_worker)["seed"]))), flush=True)
        return {}
    if {"menger-r2d2", "apex"} & set(args.sides):
        check_menger(args.python, ["cartpole-novel-r2d2", "cartpole-apex"])
    load_start = os.getloadavg()[0]
    print(f"load average (1 min) at the start: {load_start:.2f}; {os.cpu_count()} CPUs", flush=True)
    runs: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="menger-memory-") as root:
        for seed in args.seeds:
            runs[seed] = {}
            for side in args.sides:  # alternating, so that every side sees the same minutes of the machine
                try:
                    if side == "menger-r2d2":
                        result = run_menger(R2D2, seed, args.python, [], Path(root), 1800)
                    elif side == "apex":
                        result = run_apex(seed, args.python, args.apex_seconds, Path(root))
                    else:
                        result = run_peer(seed, args.peer_python)
                except (ContractError, RuntimeError) as error:
                    raise SystemExit(f"seed {seed} {side}: {error}") from None
                runs[seed][side] = result
                seconds, steps = _cell(result)
                print(f"seed {seed} {side}: {seconds} s, {steps} steps", flush=True)
    header = f"{'seed':>6}" + "".join(f"  {side + ' s':>28}  {'steps':>9}" for side in args.sides) + f"  {'load':>5}"
    lines = ["", f"{NOVEL}: training s (evaluation excluded) to a deterministic 10-episode mean of {TARGET:g}", "",
             header]
    for seed, run in runs.items():
        cells = "".join(f"  {_cell(run[side])[0]:>28}  {_cell(run[side])[1]:>9}" for side in args.sides)
        lines.append(f"{seed:>6}{cells}  {max(r['load'] for r in run.values()):>5.2f}")
    medians = {side: (median_or_none([run[side]["train_s"] for run in runs.values()]),
                      median_or_none([run[side]["steps"] for run in runs.values()])) for side in args.sides}
    lines.append(f"{'median':>6}" + "".join(
        f"  {'not reached' if s is None else f'{s:.1f}':>28}  {'-' if f is None else f'{f:,.0f}':>9}"
        for s, f in medians.values()))
    ratio = None
    if "menger-r2d2" in medians and "recurrent-ppo" in medians and None not in (medians["menger-r2d2"][0],
                                                                                  medians["recurrent-ppo"][0]):
        ratio = medians["recurrent-ppo"][0] / medians["menger-r2d2"][0]
        lines.append(f"\nRecurrentPPO / R2D2 of the median seconds: {ratio:.2f} (target: above 1, R2D2 takes less "
                     f"wall clock; {'met' if ratio > 1 else 'NOT met'})")
    load_end = os.getloadavg()[0]
    lines.append(f"load average (1 min): {load_start:.2f} at the start, {load_end:.2f} at the end")
    print("\n".join(lines))
    if args.plot:
        plot(runs[args.seeds[0]], args.plot)
        print(f"curves: {args.plot}")
    out = {"runs": runs, "medians": medians, "ratio_ppo_over_r2d2": ratio, "load_average": [load_start, load_end]}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
