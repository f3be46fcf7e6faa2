"""A league of several learners (`league.mode: league`): one Trainer per learned player, side by side.

    RUN_DIR/config.yaml                 the experiment
    RUN_DIR/league/                     the league: state.json (players, payoff, Elo), snapshots/, tables/
    RUN_DIR/players/<name>/             one ordinary run directory per learner (config, checkpoints, metrics)

Every learner (main agents, main exploiters, league exploiters) is a Trainer of its own, with its own launcher,
actors, coordinator and learner, in a thread of this process; they share one `LeagueHub`: the league itself, under
its lock, and the host's snapshot store that every actor reads. A learner's actors play the opponents its table
names (`menger.runtime.league`). The run ends when every learner has stopped; one that fails stops the others, each
with its closing checkpoint. The league's state is saved with every learner's checkpoint and restored, exactly,
on `menger resume RUN_DIR`, with each learner from its own newest checkpoint.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
from pathlib import Path

from menger.checkpoint import CheckpointManager
from menger.config import dump_yaml, to_dict
from menger.launch import make_launcher
from menger.runtime import MetricsWriter, Trainer, TrainResult
from menger.runtime.league import HUB_FILE, LeagueHub

log = logging.getLogger("menger.league")

PLAYERS_DIR = "players"


def player_dirs(run_dir: str | Path) -> dict[str, Path]:
    """The learners of a league run, by name (empty for any other run)."""
    root = Path(run_dir) / PLAYERS_DIR
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir()} if root.is_dir() else {}


def has_checkpoint(run_dir: str | Path) -> bool:
    return any(CheckpointManager(p / "checkpoints").list() for p in player_dirs(run_dir).values())


def run_league(config, run_dir: Path, *, resume: bool, make_loggers, lock, observers=(),
               progress_for=None) -> TrainResult:
    """Train every learner of `config.league` into `run_dir/players/<name>` (module doc). `make_loggers(cfg, dir)`
    builds a learner's loggers; `lock(run_dir)`: the run directory's owner lock, taken once it exists (a config
    refused before that leaves no directory); `progress_for(cfg)`: an observer showing the first main agent's
    progress, or None."""
    hub = LeagueHub(config.league, run_dir / "league", seed=config.runtime.seed)
    names = hub.league.learners()
    trainers: dict[str, Trainer] = {}
    for index, name in enumerate(names):
        cfg = dataclasses.replace(config, name=f"{config.name}-{name}", runtime=dataclasses.replace(
            config.runtime, seed=config.runtime.seed + 7919 * index))
        trainers[name] = Trainer(cfg, run_dir / PLAYERS_DIR / name, launcher=make_launcher(cfg.runtime),
                                 resume=resume and (run_dir / PLAYERS_DIR / name).exists(), league=(hub, name),
                                 observers=list(observers))
    for trainer in trainers.values():
        trainer.preflight()
    run_dir.mkdir(parents=True, exist_ok=True)
    with lock(run_dir):
        session = _shared_session(config)
        try:
            return _run(config, run_dir, hub, trainers, resume, make_loggers, progress_for)
        finally:
            if session is not None:
                session.shutdown()


def _shared_session(config):
    """On Ray, one session for every learner, joined before they start (so none of them owns it and shuts it down
    under the others)."""
    if config.runtime.launcher != "ray":
        return None
    session = make_launcher(config.runtime)
    session.connect(config.runtime.ray.address)
    return session


def _run(config, run_dir: Path, hub: LeagueHub, trainers: dict[str, Trainer], resume: bool, make_loggers,
         progress_for) -> TrainResult:
    names = list(trainers)
    dump_yaml(to_dict(config), run_dir / "config.yaml")
    if resume and (run_dir / "league" / HUB_FILE).exists():
        hub.load_state(json.loads((run_dir / "league" / HUB_FILE).read_text()))
        log.info("league resumed: %d members", len(hub.league.players()))
    loggers = []
    for index, (name, trainer) in enumerate(trainers.items()):
        logger = make_loggers(trainer.cfg, trainer.run_dir)
        loggers.append(logger)
        trainer.observers.append(MetricsWriter(logger))
        shown = progress_for(trainer.cfg) if index == 0 and progress_for is not None else None
        if shown is not None:
            trainer.observers.append(shown)
    results: dict[str, TrainResult] = {}
    errors: dict[str, BaseException] = {}

    def train(name: str, trainer: Trainer) -> None:
        try:
            results[name] = trainer.run()
        except BaseException as exc:  # noqa: BLE001 - reported below, after the others stopped
            errors[name] = exc
            for other in trainers.values():
                other.request_stop()

    threads = [threading.Thread(target=train, args=item, name=f"menger-league-{item[0]}", daemon=True)
               for item in trainers.items()]
    for observer in trainers[names[0]].observers:  # signal handlers live in this thread: they stop every learner
        if hasattr(observer, "watch"):
            observer.watch(lambda: [trainer.request_stop() for trainer in trainers.values()])
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        for trainer in trainers.values():
            trainer.request_stop()
        for thread in threads:
            thread.join()
        raise
    finally:
        hub.save_state()
        for logger in loggers:
            logger.close()
    if errors:
        name, error = next(iter(errors.items()))
        raise error
    main = results[names[0]]
    return TrainResult(run_dir, main.final_metrics, main.reached_target)
