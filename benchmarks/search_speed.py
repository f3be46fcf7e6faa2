"""Search speed on Connect Four, one core: each position kind side by side in the same sitting.

* **Self-play step**: one move of `--games` games searched side by side (`MCTS.search_many`, what an AlphaZero
  actor does each step), Gumbel with 16 walks (`connect4-alphazero`) and PUCT with 50, on PettingZoo's env
  copied (`PettingZooState`) and on bitboards (`ConnectFourState`); seconds a step, the median of `--repeats`.
* **Play time**: one game's move with 400 PUCT walks (`menger match --search 400`), with and without random
  playouts mixed into the leaves (`--rollouts 0.5`).

The network is `connect4-alphazero`'s, untrained (its cost is the same trained), on one torch thread. Positions
are the games' sixth moves, drawn at random. The 1-minute load average is printed beside the figures: on shared
cores every time swings with other work.

    python benchmarks/search_speed.py [--games 64] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

import numpy as np
import torch

from menger.search.connect_four import ConnectFourState
from menger.search.games import PettingZooState
from menger.search.gumbel import GumbelSearch
from menger.search.mcts import MCTS


def _network():
    import gymnasium

    from menger.experiment import load_experiment
    from menger.models import build_policy

    config = load_experiment("connect4-alphazero")
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(0, 1, (6, 7, 2), np.int8),
                                   "action_mask": gymnasium.spaces.Box(0, 1, (7,), np.int8)})
    return build_policy(space, gymnasium.spaces.Discrete(7), config.model, "alphazero", config.env.normalize)


def _evaluate(network):
    @torch.no_grad()
    def evaluate(states):
        observed = [state.observe() for state in states]
        obs = {key: torch.from_numpy(np.stack([o[key] for o in observed])).float()
               for key in ("observation", "action_mask")}
        logits, values, _ = network(obs)
        return torch.softmax(logits, -1).numpy(), values.clamp(-1.0, 1.0).numpy()
    return evaluate


def _positions(games: int, seed: int = 0) -> list:
    from pettingzoo.classic import connect_four_v3

    rng, envs = np.random.default_rng(seed), []
    for g in range(games):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            env = connect_four_v3.env()
        env.reset(seed=g)
        for _ in range(6):
            env.step(int(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]))))
        envs.append(env)
    return envs


def _median_s(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--play-walks", type=int, default=400)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    evaluate = _evaluate(_network())
    envs = _positions(args.games)
    kinds = {"pettingzoo": PettingZooState, "bitboards": ConnectFourState.from_env}
    out: dict = {"games": args.games, "repeats": args.repeats, "load_1min_before": os.getloadavg()[0]}
    print(f"one self-play step: {args.games} Connect Four games searched side by side, median of {args.repeats}")
    print(f"{'search':<22}{'PettingZoo env copies':>24}{'bitboards':>14}{'speed-up':>10}")
    for name, search in (("gumbel, 16 walks", GumbelSearch(evaluate, 16, 16)),
                         ("puct, 50 walks", MCTS(evaluate, 50, batch=1))):
        rng = np.random.default_rng(0)
        times = {kind: _median_s(lambda: search.search_many([make(env) for env in envs], rng=rng), args.repeats)
                 for kind, make in kinds.items()}
        out[f"step_s {name}"] = times
        print(f"{name:<22}{times['pettingzoo']:>22.3f} s{times['bitboards']:>12.3f} s"
              f"{times['pettingzoo'] / times['bitboards']:>9.1f}x")
    print(f"\none game's move at play time, {args.play_walks} PUCT walks (8 leaves a network call), median of "
          f"{args.repeats}")
    for label, rollouts in (("network value", 0.0), ("half playouts", 0.5)):
        times = {}
        for kind, make in kinds.items():
            search = MCTS(evaluate, args.play_walks, batch=8, rollouts=rollouts, seed=0)
            times[kind] = _median_s(lambda: search.search(make(envs[0])), args.repeats)
        out[f"move_s {label}"] = times
        print(f"{label:<22}{times['pettingzoo'] * 1000:>21.1f} ms{times['bitboards'] * 1000:>11.1f} ms"
              f"{times['pettingzoo'] / times['bitboards']:>9.1f}x")
    out["load_1min_after"] = os.getloadavg()[0]
    print(f"\nload average (1 min): {out['load_1min_before']:.2f} before, {out['load_1min_after']:.2f} after")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
