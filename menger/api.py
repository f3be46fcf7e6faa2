"""The Python entry points: train an experiment, resume a run, load a trained policy."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import torch

from menger.checkpoint import CheckpointManager, unflatten_state
from menger.config import from_dict, load_yaml
from menger.experiment import (ExperimentConfig, load_experiment, migrate_legacy_keys, migrate_legacy_override,
                               wrapper_spec)
from menger.explain import ERROR_FILE, write_error_file
from menger.launch import make_launcher
from menger.logging import JsonlLogger, LogLines, MultiLogger, TensorBoardLogger, TerminalProgress
from menger.runtime import MetricsWriter, Trainer, TrainResult, autosize
from menger.runtime.rundir import RunDirectoryLock
from menger.runtime.spaces import fit_to_env
from menger.runtime.system import write_system_file

RunResult = TrainResult


def default_run_dir(config: ExperimentConfig, root: str | Path = "runs") -> Path:
    return Path(root) / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _remote_loggers(config: ExperimentConfig) -> list:
    """The loggers that need a package of their own: built before the run directory, so a missing one stops
    the run before anything is written (they open their runs in `start`)."""
    wandb = config.log.wandb
    if wandb.project is None:
        return []
    from menger.logging.wandb import WandbLogger

    return [WandbLogger(wandb.project, entity=wandb.entity, mode=wandb.mode, group=wandb.group, tags=wandb.tags)]


def _loggers(config: ExperimentConfig, run_dir: Path, remote=()):
    loggers = [JsonlLogger(run_dir / "metrics.jsonl")]
    if config.log.tensorboard:
        loggers.append(TensorBoardLogger(run_dir / "tb"))
    return MultiLogger(*loggers, *remote)


def run_experiment(config: ExperimentConfig, run_dir: Path, *, resume: bool = False, progress: bool = False,
                   observers=(), log_lines: bool = False) -> TrainResult:
    """Train `config` into `run_dir` (or continue it: `resume`); `observers` get the trainer's hooks
    (`menger.runtime.Observer`). `progress`: the live display; `log_lines`: one plain line per log interval.

    What is refused before anything starts (the config, the env, the network) leaves no run directory. A run
    that fails after it started leaves its `config.yaml` and `error.txt` (what failed and every traceback,
    `menger.explain`); the exception is re-raised with `error_file` set to that file's path. A league of several
    learners (`league.mode: league`) trains one learner per player (`menger.launch.league`). Each start (and
    resume) records what it runs on in `RUN_DIR/system.json` (`menger.runtime.system`)."""
    config, choice, adjust = _resolve_auto(config, run_dir, resume)
    config = fit_to_env(config)  # a multi-agent env's rows in whole games, env.normalize's auto decided
    if adjust:
        observers = [*observers, autosize.BatchAdjuster()]
    elastic = _elastic(config, choice, run_dir, resume)
    if elastic is not None:
        observers = [*observers, elastic[1]]
    if config.league.mode == "league":
        return _run_league(config, run_dir, resume=resume, progress=progress, observers=observers,
                           log_lines=log_lines)
    # the Trainer refuses coordination that can never fill a batch, before any file
    trainer = Trainer(config, run_dir, launcher=make_launcher(config.runtime), resume=resume, observers=observers,
                      active_actors=elastic[0] if elastic else None)
    trainer.preflight()  # the env and the network build, before any file
    remote = _remote_loggers(config)  # a logger's missing package (wandb), before any file
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"cannot create the run directory {run_dir} ({exc.strerror or exc}); give a writable "
                           "--run-dir") from exc
    with _owned(run_dir, resume):  # one training process per run directory (refused naming the other's pid)
        if choice is not None:
            autosize.write_report(run_dir, choice)
        logger = _loggers(config, run_dir, remote)
        display = TerminalProgress(config.name, target_return=config.stop.target_return,
                                   total_frames=config.stop.env_frames, enabled=progress and config.log.progress) \
            if progress else None
        trainer.observers += [MetricsWriter(logger)] + ([MetricsWriter(display)] if display is not None else [])
        if log_lines:
            trainer.observers.append(MetricsWriter(LogLines(config.name, target_return=config.stop.target_return)))
        try:
            return trainer.run()
        except Exception as exc:  # a run that started and failed says why in RUN_DIR/error.txt (then re-raised)
            exc.error_file = write_error_file(run_dir, exc, "resume" if resume else "train")
            raise
        finally:
            logger.close()
            if display is not None:
                display.close()


@contextlib.contextmanager
def _owned(run_dir: Path, resume: bool):
    """The run directory's owner lock, then `RUN_DIR/system.json` for this start (`menger.runtime.system`): only
    the process that owns the run records what it runs on."""
    with RunDirectoryLock(run_dir) as lock:
        write_system_file(run_dir, resume=resume)
        yield lock


def _resolve_auto(config: ExperimentConfig, run_dir: Path, resume: bool):
    """`auto` runtime keys made numbers before anything starts: measured and picked for a new run
    (`menger.runtime.autosize`), the saved layout for a resume (a resume never measures again, so it keeps its
    layout). Returns the config, the choice (None when nothing was measured) and whether the batch size is kept
    fitting during the run (async, batch_unrolls auto, now or when the run was started)."""
    choice = None
    report = autosize.read_report(run_dir) if resume else None
    if config.auto_keys and resume:
        config = autosize.keep_saved(config, load_run_config(run_dir))
    elif config.auto_keys:
        cpus = None
        if autosize.on_cluster(config):  # the cluster's CPUs, read by the launcher layer (it joins the cluster)
            from menger.launch.ray import cluster_cpus

            address = config.runtime.ray.address
            cpus = lambda: cluster_cpus(address)  # noqa: E731
        config, choice = autosize.resolve(config, cluster_cpus=cpus)
    keys = choice.keys if choice is not None else (report or {}).get("keys", ())
    adjust = "runtime.coordination.batch_unrolls" in keys and config.coordination == "async"
    return config, choice, adjust


def _elastic(config: ExperimentConfig, choice, run_dir: Path, resume: bool):
    """An elastic run on a Ray cluster (runtime.actors auto with runtime.ray.address): (the actors to start with,
    the `ClusterWatcher` that starts and parks actors as nodes join and leave); else None. A resume re-picks
    with the costs its first start measured."""
    report = choice.report() if choice is not None else autosize.read_report(run_dir) if resume else None
    if not autosize.on_cluster(config) or not report or not report.get("pool"):
        return None
    sizes = [a["actors"][1] for a in report.get("adjustments", ()) if "actors" in a]
    active = min(sizes[-1] if sizes else report["active"], config.runtime.actors)
    units = config.runtime.coordination.batch_unrolls
    watcher = autosize.ClusterWatcher(autosize.costs_from_report(report), actor_cpus=config.runtime.ray.actor_cpus,
                                      batch_unrolls=None if "runtime.coordination.batch_unrolls" in report["keys"]
                                      else units)
    return active, watcher


def _run_league(config: ExperimentConfig, run_dir: Path, *, resume: bool, progress: bool, observers,
                log_lines: bool) -> TrainResult:
    from menger.launch.league import run_league

    def progress_for(cfg):
        if log_lines:
            return MetricsWriter(LogLines(cfg.name, target_return=cfg.stop.target_return))
        if progress and cfg.log.progress:
            return MetricsWriter(TerminalProgress(cfg.name, target_return=cfg.stop.target_return,
                                                  total_frames=cfg.stop.env_frames, enabled=True))
        return None

    try:
        return run_league(config, run_dir, resume=resume, make_loggers=_loggers, lock=lambda d: _owned(d, resume),
                          observers=observers, progress_for=progress_for)
    except Exception as exc:
        if run_dir.exists():
            exc.error_file = write_error_file(run_dir, exc, "resume" if resume else "train")
        raise


def train(config: str | dict | ExperimentConfig, overrides: list[str] = (), run_dir: str | None = None,
          progress: bool = False, observers=()) -> TrainResult:
    """Train a preset name, a YAML path, a dict or a config; returns the run directory and final metrics."""
    cfg = config if isinstance(config, ExperimentConfig) else load_experiment(config, list(overrides))
    path = Path(run_dir) if run_dir else default_run_dir(cfg)
    return run_experiment(cfg, path, progress=progress, observers=observers)


class UntrustedRunError(RuntimeError):
    """A run directory names code outside Menger that opening it would import, and the user did not allow it."""


# Imported from a run directory without consent: Menger's own modules, gymnasium's wrappers and PettingZoo's envs
# (what their arguments can be in a YAML file, numbers and strings, cannot make them run code).
TRUSTED_MODULES = ("menger", "gymnasium.wrappers", "pettingzoo")


def _imported_modules(config: ExperimentConfig) -> dict[str, str]:
    """Config key -> the module a `module:attribute` value of it would import (env ids, custom networks,
    env wrappers)."""
    named = {"env.id": config.env.id, "model.network": config.model.network}
    named.update({f"env.wrappers[{index}]": wrapper_spec(item)[0] for index, item in enumerate(config.env.wrappers)})
    return {key: value.split(":", 1)[0].strip() for key, value in named.items() if value and ":" in value}


def check_run_imports(config: ExperimentConfig, allow_import=(), source: str = "the run directory") -> None:
    """Refuse a saved config that would import code outside `menger` and the modules in `allow_import`.

    A run directory is data: someone else's `config.yaml` with `env.id: os:system` and `env.kwargs` would run a
    shell command the moment it is opened. Gymnasium ids (no ':') and Menger's own modules need no consent.
    """
    allowed = (*TRUSTED_MODULES, *allow_import)
    imported = _imported_modules(config)
    refused = {key: module for key, module in imported.items()
               if not any(module == name or module.startswith(name + ".") for name in allowed)}
    if refused:
        names = ", ".join(f"{key}={_named_value(config, key)!r}" for key in refused)
        modules = sorted({module.split(".")[0] for module in refused.values()})
        raise UntrustedRunError(
            f"{source} names code that opening it would import: {names}. A run directory is data, and Menger "
            f"imports only its own modules from one unless you allow more. If you trust this run, allow its "
            f"modules: --allow-import {' --allow-import '.join(modules)} (menger eval / resume), or "
            f"allow_import={modules} (menger.api.load_policy / resume / load_run_config).")


def _named_value(config: ExperimentConfig, key: str) -> str:
    if key.startswith("env.wrappers["):
        return wrapper_spec(config.env.wrappers[int(key[len("env.wrappers["):-1])])[0]
    section, name = key.split(".")
    return getattr(getattr(config, section), name)


def load_run_config(run_dir: str | Path, allow_import=()) -> ExperimentConfig:
    """A run directory's effective config, refused if it names code outside Menger and `allow_import`."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a Menger run directory (no config.yaml); give the directory "
                                "that `menger train` printed")
    config = from_dict(ExperimentConfig, migrate_legacy_keys(load_yaml(path)))  # runs of earlier versions too
    check_run_imports(config, allow_import, source=str(path))
    return config


def resume(run_dir: str | Path, overrides: list[str] = (), progress: bool = False, observers=(),
           allow_import=(), log_lines: bool = False) -> TrainResult:
    """Continue a run from its newest valid checkpoint (falling back, loudly, past a corrupt one).

    `allow_import`: modules outside Menger the run's config may import (its env, its network)."""
    from menger.config import apply_overrides, to_dict

    cfg = load_run_config(run_dir, allow_import)
    if overrides:
        overrides = [migrate_legacy_override(o) for o in overrides]
        cfg = from_dict(ExperimentConfig, apply_overrides(to_dict(cfg), overrides))
    from menger.launch.league import has_checkpoint

    if not CheckpointManager(Path(run_dir) / "checkpoints").list() and not has_checkpoint(run_dir):
        # refused before the run directory changes
        error_file = Path(run_dir) / ERROR_FILE
        why = f"; it failed before its first one, and {error_file} says why" if error_file.exists() else ""
        raise RuntimeError(f"nothing to resume in {run_dir}: it has no checkpoint{why}; start it again with "
                           "menger train")
    return run_experiment(cfg, Path(run_dir), resume=True, progress=progress, observers=observers,
                          log_lines=log_lines)


class Policy:
    """A trained policy for evaluation or deployment: `act(obs_batch) -> actions` (numpy in, numpy out)."""

    def __init__(self, network, config: ExperimentConfig):
        self.network, self.config = network.eval(), config
        self.state = None
        self.generator: torch.Generator | None = None  # sampled actions' randomness (None: torch's global one)

    def act(self, obs, deterministic: bool = True):
        """Actions for a batch of observations [N, *obs_shape] (or a dict of such), or for one observation
        (*obs_shape: the action alone comes back), in the env's action space: an array [N, ...] (Box actions
        clipped to the bounds), or a list of N tuples or dicts for a Tuple or Dict space. A recurrent policy keeps
        its state per env (row) from call to call; call `reset_state(done)` where episodes ended. A batch of another
        size starts from a zero state."""
        from menger.models import obs_to_tensors

        if self._single(obs):
            return self.act({k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, dict)
                            else np.asarray(obs)[None], deterministic)[0]
        tensors = obs_to_tensors(obs)
        if isinstance(tensors, dict):
            tensors = {k: v.float() for k, v in tensors.items()}
        batch = next(iter(tensors.values())).shape[0] if isinstance(tensors, dict) else tensors.shape[0]
        if self.network.lstm_size and (self.state is None or self.state.shape[1] != batch):
            self.state = self.network.initial_state(batch)
        out = self.network.act(tensors, self.state, deterministic=deterministic, generator=self.generator)
        self.state = out.state
        return self.network.codec.to_env(out.action.numpy())

    def _single(self, obs) -> bool:
        """One observation rather than a batch: its shape is the observation space's own."""
        import gymnasium as gym

        space = self.network.obs_space
        if isinstance(space, gym.spaces.Dict) and isinstance(obs, dict):
            return all(np.shape(obs[key]) == sub.shape for key, sub in space.spaces.items() if key in obs)
        return not isinstance(obs, dict) and np.shape(obs) == space.shape

    def reset_state(self, done=None) -> None:
        """Zero the recurrent state of envs whose episode ended: `done` [N] of bools for a batch, one bool for
        a single observation, None for all of them (a new set of episodes)."""
        if done is None:
            self.state = None
        elif self.state is not None and self.state.numel():
            keep = 1.0 - np.asarray(done, dtype=np.float32).reshape(-1)
            self.state = self.state * torch.from_numpy(keep).unsqueeze(-1)


def load_policy(run_dir: str | Path, allow_import=()) -> Policy:
    """The run's newest valid policy; `allow_import`: modules outside Menger its config may import."""
    from menger.envs import make_vec_env
    from menger.models import build_policy

    cfg = load_run_config(run_dir, allow_import)
    checkpoint = CheckpointManager(Path(run_dir) / "checkpoints").load_latest()
    if checkpoint is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint yet; train longer or wait for the first checkpoint")
    probe = make_vec_env(cfg.env.id, 1, seed=0, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset,
                         wrappers=cfg.env.wrappers, multiagent=cfg.env.multiagent)
    network = build_policy(probe.single_observation_space, probe.single_action_space, cfg.model, cfg.algo,
                           cfg.env.normalize)
    probe.close()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    network.load_state_dict(state["learner"]["model"])
    return Policy(network, cfg)


class RunPlayer:
    """A trained multi-agent policy as a player (`menger match`, a user's own games): `act(observation,
    action_mask, agent=None) -> action`, with one agent's observation in PettingZoo's format. `agent` (its name)
    matters only to a policy that tells teammates apart (`env.multiagent.agent_id`)."""

    def __init__(self, policy: Policy, sides: tuple, deterministic: bool = True, seed: int = 0):
        self.policy, self.sides, self.deterministic = policy, sides, deterministic
        self.space = policy.network.obs_space
        if not deterministic:  # sampled actions drawn from a seeded generator: a match replays from its --seed
            policy.generator = torch.Generator().manual_seed(int(seed))

    def act(self, observation, action_mask=None, agent: str | None = None):
        from menger.envs.multiagent import AGENT_KEY, CRITIC_KEY, MASK_KEY, OBS_KEY

        if isinstance(observation, dict) and OBS_KEY in observation:
            action_mask = observation.get(MASK_KEY, action_mask)
            observation = observation[OBS_KEY]
        row = {OBS_KEY: np.asarray(observation)[None]}
        for key, sub in self.space.spaces.items():
            if key == MASK_KEY:
                mask = np.ones(sub.shape, np.int8) if action_mask is None else np.asarray(action_mask)
                row[key] = mask[None]
            elif key == AGENT_KEY:
                index = next((side.index(agent) for side in self.sides if agent in side), 0)
                row[key] = np.eye(sub.shape[0], dtype=np.float32)[index][None]
            elif key == CRITIC_KEY:  # the value function's input: acting does not read it
                row[key] = np.zeros((1, *sub.shape), np.float32)
        return self.policy.act(row, self.deterministic)[0]

    def reset(self) -> None:
        self.policy.reset_state()


def run_player(run_dir: str | Path, policy: str | None = None, allow_import=(), seed: int = 0,
               deterministic: bool | None = None) -> RunPlayer:
    """The newest policy of a multi-agent run as a `RunPlayer`. A league run has one per learner: `policy` names
    it (default: its first main agent). ``deterministic=True``: it takes its most likely action; ``False``: it
    samples, from a generator seeded by `seed`; ``None``: as its config's `env.multiagent.match_actions` says."""
    from menger.envs import make_vec_env
    from menger.launch.league import player_dirs

    run_dir = Path(run_dir)
    players = player_dirs(run_dir)
    if players:
        name = policy or next((n for n in players if n.startswith("main")), next(iter(players)))
        if name not in players:
            raise ValueError(f"{run_dir} has no policy {name!r}; its learners: {', '.join(players)}")
        run_dir = players[name]
    elif policy not in (None, "main_0"):
        raise ValueError(f"--policy {policy}: {run_dir} is not a league run; it has one policy (leave --policy out)")
    loaded = load_policy(run_dir, allow_import)
    cfg = loaded.config
    probe = make_vec_env(cfg.env.id, 1, seed=seed, kwargs=dict(cfg.env.kwargs), multiagent=cfg.env.multiagent)
    sides = getattr(probe, "sides", ())
    probe.close()
    if not sides:
        raise ValueError(f"{run_dir} trained on {cfg.env.id!r}, which is not a multi-agent env: evaluate it with "
                         "menger eval instead")
    if deterministic is None:
        deterministic = cfg.env.multiagent.match_actions == "most_likely"
    return RunPlayer(loaded, sides, deterministic, seed)
