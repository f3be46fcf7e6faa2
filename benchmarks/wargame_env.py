"""Raw wargame steps/s with random allowed actions: the vectorised core at G games, and the PettingZoo env.

Each figure is the median over ``--repeats`` timing windows of ``--seconds`` each. A game step moves all
2n units of one game (n = 5 a side by default), so agent steps/s = game steps/s x 2n. Actions are drawn
from each step's action mask (uniform over allowed actions), and that drawing is timed with the step, as an
actor pays for it too; games that end are reset at once (the reset is timed as well).

    python benchmarks/wargame_env.py [--seconds 1] [--repeats 5] [--games 1 16 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from menger.envs.wargame import WargameBatch, WargameConfig, parallel_env


def batch_rate(num_games: int, seconds: float, config: WargameConfig) -> float:
    """Game steps per second of a WargameBatch of ``num_games`` games."""
    batch = WargameBatch(config, num_games)
    rng = np.random.default_rng(0)
    out = batch.reset(seed=0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(16):
            masks = out.obs["action_mask"]
            out = batch.step((rng.random(masks.shape) * masks).argmax(-1))
            if out.done.any():
                out = batch.reset(games=out.done)
        steps += 16
    return steps * num_games / (time.perf_counter() - started)


def parallel_env_rate(seconds: float, config: WargameConfig) -> float:
    """Game steps per second of the PettingZoo ParallelEnv (dict in, dicts out)."""
    game = parallel_env(config)
    rng = np.random.default_rng(0)
    observations, _ = game.reset(seed=0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(16):
            if not game.agents:
                observations, _ = game.reset()
            masks = {agent: observations[agent]["action_mask"] for agent in game.agents}
            actions = {agent: int((rng.random(len(mask)) * mask).argmax()) for agent, mask in masks.items()}
            observations, *_ = game.step(actions)
        steps += 16
    return steps / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timing window")
    parser.add_argument("--repeats", type=int, default=5, help="timing windows per case; the median counts")
    parser.add_argument("--games", type=int, nargs="+", default=[1, 16, 64], help="batch sizes of the core")
    args = parser.parse_args(argv)
    config = WargameConfig()
    agents = 2 * config.num_units
    cases = [(f"WargameBatch, G={g}", lambda g=g: batch_rate(g, args.seconds, config)) for g in args.games]
    cases.append(("PettingZoo ParallelEnv (1 game)", lambda: parallel_env_rate(args.seconds, config)))
    print(f"default map {config.map.height}x{config.map.width}, {config.num_units} v {config.num_units}, "
          f"one process; medians of {args.repeats} x {args.seconds:g} s")
    print(f"{'case':34s} {'game steps/s':>14s} {'agent steps/s':>15s}")
    for label, measure in cases:
        rate = statistics.median(measure() for _ in range(args.repeats))
        print(f"{label:34s} {rate:14,.0f} {rate * agents:15,.0f}")
    print("load average (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
