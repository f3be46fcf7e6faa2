"""Multi-agent speed, each side by side with its baseline in the same sitting.

* **Connect Four, one core**: PettingZoo's own random play (whole games through the AEC API, the reference rate)
  against Menger's self-play: `MultiAgentVecEnv` of `--games` games in which the learned side acts with a policy
  network and the other side with a frozen snapshot of it from the `SnapshotStore` (both batched across the
  games), torch on one thread. Games/s, medians of `--repeats` windows.
* **Wargame**: raw env game steps/s with random allowed actions (the vectorised core at 8 games, with the
  preset's env options) against the game steps/s learned from in a `wargame-mappo` run of `--train-s` seconds on
  this machine (2 actor processes, the learner in this one; the other team played by focus-fire).
* **Connect Four training**: games/s of a `connect4-selfplay` run of `--train-s` seconds (against random and its
  snapshots: the alpha-beta opponents are left out, their search would be what is measured; every game from the
  empty board, as PettingZoo's reference plays them, without the preset's random opening moves).

    python benchmarks/multiagent.py [--seconds 2] [--repeats 5] [--games 32] [--train-s 40]

The load average is printed: on shared cores every figure moves with other work.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from connect_four import random_games_per_second  # noqa: E402
from wargame_env import batch_rate  # noqa: E402

from menger import api  # noqa: E402
from menger.envs.multiagent import MultiAgentVecEnv  # noqa: E402
from menger.envs.wargame import make_config  # noqa: E402
from menger.experiment import ExperimentConfig, load_experiment  # noqa: E402
from menger.league.snapshots import FrozenPolicy, SnapshotStore  # noqa: E402
from menger.models import build_policy  # noqa: E402


class SnapshotOpponent:
    def __init__(self, frozen: FrozenPolicy):
        self.frozen = frozen

    def assign(self, game: int) -> str:
        return "snapshot"

    def act(self, name, raw, encoded):
        return self.frozen.act(encoded)


def selfplay_games_per_second(games: int, seconds: float, store_dir: Path) -> float:
    from pettingzoo.classic import connect_four_v3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        envs = MultiAgentVecEnv(connect_four_v3.env, games, seed=0, swap_seats=True)
    cfg = ExperimentConfig()
    policy = build_policy(envs.single_observation_space, envs.single_action_space, cfg.model, "ppo")
    template = build_policy(envs.single_observation_space, envs.single_action_space, cfg.model, "ppo")
    store = SnapshotStore(store_dir)
    generator = torch.Generator().manual_seed(0)
    envs.set_opponents(SnapshotOpponent(FrozenPolicy(template, store.open(store.put(policy)), generator)))
    obs = envs.reset()
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        tensors = {k: torch.from_numpy(v).float() for k, v in obs.items()}
        obs = envs.step(policy.act(tensors, generator=generator).action.numpy()).obs
    return len(envs.pop_results()) / (time.perf_counter() - started)


def training(preset: str, seconds: float, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = api.train(preset, overrides=[f"stop.wall_clock_s={seconds}", "log.tensorboard=false",
                                              "checkpoint.interval_s=0", *overrides], run_dir=f"{tmp}/run")
    return result.final_metrics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timing window")
    parser.add_argument("--repeats", type=int, default=5, help="windows per figure; the median counts")
    parser.add_argument("--games", type=int, default=32, help="Connect Four games of the self-play env")
    parser.add_argument("--train-s", type=float, default=40.0, help="seconds of each training run (0: none)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    rates = [random_games_per_second(args.seconds, seed=i) for i in range(args.repeats)]
    with tempfile.TemporaryDirectory() as tmp:
        selfplay = [selfplay_games_per_second(args.games, args.seconds, Path(tmp)) for _ in range(args.repeats)]
    print(f"Connect Four, one core: PettingZoo random play {statistics.median(rates):,.0f} games/s; Menger self-play "
          f"({args.games} games, both sides a policy network, one a frozen snapshot) "
          f"{statistics.median(selfplay):,.0f} games/s; ratio {statistics.median(selfplay) / statistics.median(rates):.2f}")
    game = make_config(**load_experiment("wargame-mappo").env.kwargs)  # the game the preset trains on
    units = game.num_units
    raw = statistics.median(batch_rate(8, args.seconds, game) for _ in range(args.repeats))
    print(f"wargame raw env, 8 games, random actions: {raw:,.0f} game steps/s ({raw * 2 * units:,.0f} agent steps "
          f"of both teams; wargame-mappo's env options)")
    if args.train_s > 0:
        wargame = training("wargame-mappo", args.train_s, [])
        steps = wargame["time/env_frames"] / units / wargame["time/wall_s"]  # a frame: one learned agent's step
        print(f"wargame-mappo training, {args.train_s:g} s: {steps:,.0f} game steps/s learned from "
              f"({wargame['time/env_frames']:,} frames of the {units} learned units in {wargame['time/wall_s']:.0f} "
              f"s); raw / training {raw / steps:.1f}x")
        c4 = training("connect4-selfplay", args.train_s, ["league.fixed_opponents=[random]",
                                                         "env.multiagent.random_opening=0"])
        print(f"connect4-selfplay training, {args.train_s:g} s: {c4['league/games'] / c4['time/wall_s']:,.0f} "
              f"games/s ({c4['time/env_frames'] / c4['time/wall_s']:,.0f} moves of the learner/s)")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
