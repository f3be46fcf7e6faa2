"""Connect Four speed on one core: PettingZoo's own random-play rate, and alpha-beta moves/s.

* **Random play**: whole games of `pettingzoo.classic.connect_four_v3` through the AEC API (`agent_iter`,
  `last`, a uniform legal move from the action mask, `step`), games/s; the median of `--repeats` runs.
  The reference for scale is about 585 games/s on one core (/work/shared/APPLICATIONS.md section 3).
* **Alpha-beta**: `menger.envs.connect_four.AlphaBeta(depth)` moves/s (and nodes per move) on the positions
  of games between it and a random bot, the search alone timed; and the wall time of `menger match`'s
  `play_match` for `--games` games of alpha-beta against random.

    python benchmarks/connect_four.py [--seconds 2] [--repeats 5] [--depth 4] [--games 400]

The 1-minute load average is printed beside the figures: on shared cores every rate swings with other work.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

import numpy as np

from menger.envs.connect_four import AlphaBeta, RandomBot
from menger.commands.match import env_factory, play_match

ENV_ID = "pettingzoo.classic.connect_four_v3:env"


def make_env():
    with warnings.catch_warnings():  # PettingZoo's notice about its old creation API, once per import
        warnings.simplefilter("ignore", DeprecationWarning)
        return env_factory(ENV_ID)()


def random_games_per_second(seconds: float, seed: int = 0) -> float:
    """Random legal moves through the AEC API for `seconds`: finished games per second."""
    env, rng = make_env(), np.random.default_rng(seed)
    games, started = 0, time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        env.reset(seed=seed + games)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
            else:
                legal = np.flatnonzero(observation["action_mask"])
                env.step(int(legal[rng.integers(legal.size)]))
        games += 1
    elapsed = time.perf_counter() - started
    env.close()
    return games / elapsed


def alpha_beta_moves_per_second(depth: int, games: int, seed: int = 0) -> tuple[float, float, int]:
    """(moves/s, nodes per move, moves): the search alone, on the positions of `games` games against random."""
    env, bot, opponent = make_env(), AlphaBeta(depth, seed), RandomBot(seed + 1)
    searching, moves = 0.0, 0
    for game in range(games):
        env.reset(seed=seed + game)
        bot_agent = env.possible_agents[game % 2]
        for agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            if agent == bot_agent:
                started = time.perf_counter()
                action = bot.act(observation["observation"], observation["action_mask"])
                searching += time.perf_counter() - started
                moves += 1
            else:
                action = opponent.act(observation["observation"], observation["action_mask"])
            env.step(action)
    env.close()
    return moves / searching, bot.nodes / moves, moves


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each random-play run")
    parser.add_argument("--repeats", type=int, default=5, help="random-play runs; the median is reported")
    parser.add_argument("--depth", type=int, default=4, help="alpha-beta depth")
    parser.add_argument("--games", type=int, default=400, help="games of alpha-beta against random")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    rates = [random_games_per_second(args.seconds, seed=repeat) for repeat in range(args.repeats)]
    load_random = os.getloadavg()[0]
    moves_per_s, nodes_per_move, moves = alpha_beta_moves_per_second(args.depth, min(args.games, 100))
    started = time.perf_counter()
    result = play_match(make_env, AlphaBeta(args.depth, 0), RandomBot(1), games=args.games, seed=0)
    match_s = time.perf_counter() - started
    load_end = os.getloadavg()[0]
    figures = {"random_games_per_s": statistics.median(rates), "random_games_per_s_runs": rates,
               "alphabeta_depth": args.depth, "alphabeta_moves_per_s": moves_per_s,
               "alphabeta_nodes_per_move": nodes_per_move, "alphabeta_moves_timed": moves,
               "match_games": args.games, "match_seconds": match_s, "match_score": result.score,
               "load_1min_after_random": load_random, "load_1min_at_end": load_end}
    print(f"PettingZoo connect_four_v3, random legal moves through the AEC API: "
          f"{figures['random_games_per_s']:.0f} games/s (median of {args.repeats} x {args.seconds:g} s: "
          f"{', '.join(f'{rate:.0f}' for rate in rates)}), load {load_random:.2f}")
    print(f"alpha-beta depth {args.depth}: {moves_per_s:.0f} moves/s, {nodes_per_move:.0f} nodes/move "
          f"({moves} moves against random)")
    print(f"play_match alphabeta:{args.depth} vs random, {args.games} games: {match_s:.1f} s, score "
          f"{result.score:.3f}, load {load_end:.2f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(figures, file, indent=2)
    return figures


if __name__ == "__main__":
    main()
