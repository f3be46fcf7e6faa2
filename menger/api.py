"""The Python entry points: train an experiment, resume a run, load a trained policy.

An env and a network can be given as objects (`env=MyEnv`, `network=MyNet`): classes or functions of the user's
script or of any module. The config records them by name (`__main__:MyEnv`, `menger.importable`), so a run
directory stays data; opening such a run again (`resume`, `load_policy`, `load_run_config`) takes the same objects.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import numpy as np
import numpy.typing as npt
import torch

from menger.checkpoint import CheckpointManager, unflatten_state
from menger.config import from_dict, load_yaml, to_dict
from menger.experiment import (ExperimentConfig, load_experiment_data, migrate_legacy_keys, migrate_legacy_override,
                               wrapper_spec)
from menger.explain import ERROR_FILE, write_error_file
from menger.extras import require_linux
from menger.importable import MAIN, importable_name
from menger.launch import make_launcher
from menger.logging import JsonlLogger, LogLines, MultiLogger, TensorBoardLogger, TerminalProgress
from menger.runtime import MetricsWriter, Observer, Trainer, TrainResult, autosize
from menger.runtime.rundir import RunDirectoryLock
from menger.runtime.spaces import fit_to_env
from menger.runtime.system import write_system_file

RunResult = TrainResult

ConfigSource = Union[str, Path, Mapping[str, Any], ExperimentConfig]
"""An experiment: a preset name (`menger presets`), a YAML file, a mapping of its sections, or a config."""
EnvSource = Union[str, Callable[..., Any]]
"""An env: a gymnasium id or a 'package.module:ClassOrFactory' string; or a gymnasium.Env (or VectorEnv, or
PettingZoo env) class, or a function that returns one, defined at the top level of a module or of your script."""
NetworkSource = Union[str, Callable[..., torch.nn.Module]]
"""A custom network (`model.network`, docs/models.md): a 'package.module:Class' string, or a torch.nn.Module
class (or a function returning one) called as `network(obs_space, action_space, **model.kwargs)`."""


def default_run_dir(config: ExperimentConfig, root: str | Path = "runs") -> Path:
    """runs/NAME-YYYYMMDD-HHMMSS: where a run goes when no directory is given."""
    return Path(root) / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _remote_loggers(config: ExperimentConfig) -> list[Any]:
    """The loggers that need a package of their own: built before the run directory, so a missing one stops
    the run before anything is written (they open their runs in `start`)."""
    wandb = config.log.wandb
    if wandb.project is None:
        return []
    from menger.logging.wandb import WandbLogger

    return [WandbLogger(wandb.project, entity=wandb.entity, mode=wandb.mode, group=wandb.group, tags=wandb.tags)]


def _loggers(config: ExperimentConfig, run_dir: Path, remote: Sequence[Any] = ()) -> MultiLogger:
    loggers: list[Any] = [JsonlLogger(run_dir / "metrics.jsonl")]
    if config.log.tensorboard:
        loggers.append(TensorBoardLogger(run_dir / "tb"))
    return MultiLogger(*loggers, *remote)


def run_experiment(config: ExperimentConfig, run_dir: Path, *, resume: bool = False, progress: bool = False,
                   observers: Sequence[Observer] = (), log_lines: bool = False,
                   checkpoint: str | int = "latest") -> TrainResult:
    """Train `config` into `run_dir` (or continue it: `resume`); `observers` get the trainer's hooks
    (`menger.runtime.Observer`). `progress`: the live display; `log_lines`: one plain line per log interval.

    What is refused before anything starts (the config, the env, the network) leaves no run directory. A run
    that fails after it started leaves its `config.yaml` and `error.txt` (what failed and every traceback,
    `menger.explain`); the exception is re-raised with `error_file` set to that file's path. A league of several
    learners (`league.mode: league`) trains one learner per player (`menger.launch.league`). Each start (and
    resume) records what it runs on in `RUN_DIR/system.json` (`menger.runtime.system`). `checkpoint`: what a
    resume goes on from, latest, best or a step (`resume`). Off Linux it is refused, saying what is missing
    (`menger.extras.require_linux`), as the command line does."""
    require_linux("menger.resume" if resume else "menger.train")
    config, choice, adjust = _resolve_auto(config, run_dir, resume)
    config = fit_to_env(config)  # a multi-agent env's rows in whole games, env.normalize's auto decided
    observers = list(observers)
    if adjust:
        observers.append(autosize.BatchAdjuster())
    elastic = _elastic(config, choice, run_dir, resume)
    if elastic is not None:
        observers.append(elastic[1])
    if config.league.mode == "league":
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint {checkpoint}: a league of several learners resumes each learner from its "
                             "newest checkpoint, together; resume it without --checkpoint")
        return _run_league(config, run_dir, resume=resume, progress=progress, observers=observers,
                           log_lines=log_lines)
    # the Trainer refuses coordination that can never fill a batch, before any file
    trainer = Trainer(config, run_dir, launcher=make_launcher(config.runtime), resume=resume, observers=observers,
                      active_actors=elastic[0] if elastic else None, resume_from=checkpoint)
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
            _note_error_file(exc, write_error_file(run_dir, exc, "resume" if resume else "train"))
            raise
        finally:
            logger.close()
            if display is not None:
                display.close()


@contextlib.contextmanager
def _owned(run_dir: Path, resume: bool) -> Iterator[RunDirectoryLock]:
    """The run directory's owner lock, then `RUN_DIR/system.json` for this start (`menger.runtime.system`): only
    the process that owns the run records what it runs on."""
    with RunDirectoryLock(run_dir) as lock:
        write_system_file(run_dir, resume=resume)
        yield lock


def _note_error_file(exc: Exception, path: Path | None) -> None:
    """The exception of a run that failed after it started carries `error_file`, the path of RUN_DIR/error.txt."""
    setattr(exc, "error_file", path)


def _resolve_auto(config: ExperimentConfig, run_dir: Path,
                  resume: bool) -> tuple[ExperimentConfig, autosize.Choice | None, bool]:
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

            address = str(config.runtime.ray.address)  # set: on_cluster
            cpus = lambda: cluster_cpus(address)  # noqa: E731
        config, choice = autosize.resolve(config, cluster_cpus=cpus)
    keys = choice.keys if choice is not None else (report or {}).get("keys", ())
    adjust = "runtime.coordination.batch_unrolls" in keys and config.coordination == "async"
    return config, choice, adjust


def _elastic(config: ExperimentConfig, choice: autosize.Choice | None, run_dir: Path,
             resume: bool) -> tuple[int, autosize.ClusterWatcher] | None:
    """An elastic run on a Ray cluster (runtime.actors auto with runtime.ray.address): (the actors to start with,
    the `ClusterWatcher` that starts and parks actors as nodes join and leave); else None. A resume re-picks
    with the costs its first start measured."""
    report = choice.report() if choice is not None else autosize.read_report(run_dir) if resume else None
    if not autosize.on_cluster(config) or not report or not report.get("pool"):
        return None
    sizes = [a["actors"][1] for a in report.get("adjustments", ()) if "actors" in a]
    active = min(sizes[-1] if sizes else report["active"], config.runtime.actors)
    units = config.runtime.coordination.batch_unrolls  # a number: an `auto` one was resolved and is in the keys
    watcher = autosize.ClusterWatcher(autosize.costs_from_report(report), actor_cpus=config.runtime.ray.actor_cpus,
                                      batch_unrolls=None if "runtime.coordination.batch_unrolls" in report["keys"]
                                      or units == "auto" else units)
    return active, watcher


def _run_league(config: ExperimentConfig, run_dir: Path, *, resume: bool, progress: bool,
                observers: Sequence[Observer], log_lines: bool) -> TrainResult:
    from menger.launch.league import run_league

    def progress_for(cfg: ExperimentConfig) -> MetricsWriter | None:
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
            _note_error_file(exc, write_error_file(run_dir, exc, "resume" if resume else "train"))
        raise


def train(config: ConfigSource, overrides: Sequence[str] = (), run_dir: str | Path | None = None,
          progress: bool = False, observers: Sequence[Observer] = (), *, env: EnvSource | None = None,
          network: NetworkSource | None = None, seed: int | None = None) -> TrainResult:
    """Train an experiment; returns the run directory and the final metrics (`TrainResult`).

    `config`: a preset name, a YAML file, a mapping or an `ExperimentConfig`; `overrides`: `--set` strings
    ("ppo.lr=1e-3"); `run_dir`: where the run goes (default runs/NAME-TIME); `progress`: the live display;
    `observers`: `menger.runtime.Observer`s, called from the trainer's loop.

    `env` replaces `env.id` and `network` replaces `model.network`, each a string or an object: a class or a
    function defined at the top level of your script or of a module (`EnvSource`, `NetworkSource`). The run's
    config.yaml records an object by name (`__main__:MyEnv` for one of your script): actors in threads and forked
    processes inherit it; Ray's workers import it by name, so with runtime.launcher=ray it must come from a module
    every node can import. `seed` replaces `runtime.seed`."""
    if isinstance(config, ExperimentConfig) and not overrides and env is None and network is None and seed is None:
        cfg = config  # as it was built
    else:
        source = to_dict(config) if isinstance(config, ExperimentConfig) else \
            str(config) if isinstance(config, Path) else config
        data = load_experiment_data(source if isinstance(source, str) else dict(source), list(overrides))
        cfg = from_dict(ExperimentConfig, with_objects(data, env=env, network=network, seed=seed))
    path = Path(run_dir) if run_dir else default_run_dir(cfg)
    return run_experiment(cfg, path, progress=progress, observers=observers)


def with_objects(data: Mapping[str, Any], *, env: EnvSource | None = None, network: NetworkSource | None = None,
                 seed: int | None = None) -> dict[str, Any]:
    """Experiment data with `env.id`, `model.network` and `runtime.seed` replaced by what is given (an object by
    its `module:attribute` name, `menger.importable`); the rest as it is."""
    data = dict(data)
    replaced = {("env", "id"): None if env is None else importable_name(env, "env.id"),
                ("model", "network"): None if network is None else importable_name(network, "model.network"),
                ("runtime", "seed"): seed}
    for (section, key), value in replaced.items():
        if value is not None:
            data[section] = {**(data.get(section) or {}), key: value}
    return data


class UntrustedRunError(RuntimeError):
    """A run directory names code outside Menger that opening it would import, and the user did not allow it."""


class ScriptObjectError(RuntimeError):
    """A run directory names an object of the script that trained it (`__main__:MyEnv`), and it was not given
    again (`env=`, `network=`)."""


_ARGUMENT = {"env.id": "env", "model.network": "network"}  # the argument that gives a config key's object


# Imported from a run directory without consent: Menger's own modules, gymnasium's wrappers and PettingZoo's envs
# (what their arguments can be in a YAML file, numbers and strings, cannot make them run code).
TRUSTED_MODULES = ("menger", "gymnasium.wrappers", "pettingzoo")


def _imported_modules(config: ExperimentConfig) -> dict[str, str]:
    """Config key -> the module a `module:attribute` value of it would import (env ids, custom networks,
    env wrappers)."""
    named = {"env.id": config.env.id, "model.network": config.model.network}
    named.update({f"env.wrappers[{index}]": wrapper_spec(item)[0] for index, item in enumerate(config.env.wrappers)})
    return {key: value.split(":", 1)[0].strip() for key, value in named.items() if value and ":" in value}


def check_run_imports(config: ExperimentConfig, allow_import: Sequence[str] = (), source: str = "the run directory",
                      given: Sequence[str] = ()) -> None:
    """Refuse a saved config that would import code outside `menger` and the modules in `allow_import`.

    A run directory is data: someone else's `config.yaml` with `env.id: os:system` and `env.kwargs` would run a
    shell command the moment it is opened. Gymnasium ids (no ':') and Menger's own modules need no consent, nor
    the keys in `given` (objects the caller passed: `env.id`, `model.network`). An object of the script that trained
    the run (`__main__:MyEnv`) is refused unless it is given again: no other process has that script.
    """
    allowed = (*TRUSTED_MODULES, *allow_import)
    imported = {key: module for key, module in _imported_modules(config).items() if key not in given}
    refused = {key: module for key, module in imported.items()
               if not any(module == name or module.startswith(name + ".") for name in allowed)}
    script = {key: _named_value(config, key) for key, module in refused.items() if module == MAIN}
    if script:
        passed = ", ".join(f"{_ARGUMENT.get(key, key)}={value.partition(':')[2]}" for key, value in script.items())
        names = ", ".join(f"{key}={value!r}" for key, value in script.items())
        raise ScriptObjectError(
            f"{source} names objects of the script that trained it: {names}. Only that script has them: pass them "
            f"again from a script that defines them, menger.load_policy(run_dir, {passed}) (or menger.resume, "
            f"menger.load_run_config); or move them into a module and give its name (package.module:Name) "
            f"instead of '{MAIN}' in config.yaml.")
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


def load_run_config(run_dir: str | Path, allow_import: Sequence[str] = (), *, env: EnvSource | None = None,
                    network: NetworkSource | None = None) -> ExperimentConfig:
    """A run directory's effective config, refused if it names code outside Menger and `allow_import`.

    `env`, `network`: objects (or names) that replace the saved `env.id` and `model.network`, as `train` takes
    them: a run trained on objects of a script (`__main__:MyEnv`) opens only with them given again."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a Menger run directory (no config.yaml); give the directory "
                                "that `menger train` printed")
    data = migrate_legacy_keys(load_yaml(path))  # runs of earlier versions too
    config = from_dict(ExperimentConfig, with_objects(data, env=env, network=network))
    given = [key for key, value in (("env.id", env), ("model.network", network)) if value is not None]
    check_run_imports(config, allow_import, source=str(path), given=given)
    return config


def resume(run_dir: str | Path, overrides: Sequence[str] = (), progress: bool = False,
           observers: Sequence[Observer] = (), allow_import: Sequence[str] = (), log_lines: bool = False, *,
           env: EnvSource | None = None, network: NetworkSource | None = None,
           checkpoint: str | int = "latest") -> TrainResult:
    """Continue a run from its newest valid checkpoint (falling back, loudly, past a corrupt one), or from
    `checkpoint`: "best" (`checkpoint.keep_best`) or a step (the learner's update count, `ckpt-STEP`). Going on
    from an older checkpoint moves the newer ones to `checkpoints/rewound-<time>/` (kept, never deleted).

    `allow_import`: modules outside Menger the run's config may import (its env, its network). `env`,
    `network`: the objects a run trained with `train(env=..., network=...)` needs again (`load_run_config`)."""
    from menger.config import apply_overrides

    cfg = load_run_config(run_dir, allow_import, env=env, network=network)
    if overrides:
        migrated = [migrate_legacy_override(o) for o in overrides]
        cfg = from_dict(ExperimentConfig, apply_overrides(to_dict(cfg), migrated))
    from menger.launch.league import has_checkpoint

    if not CheckpointManager(Path(run_dir) / "checkpoints").list() and not has_checkpoint(run_dir):
        # refused before the run directory changes
        error_file = Path(run_dir) / ERROR_FILE
        why = f"; it failed before its first one, and {error_file} says why" if error_file.exists() else ""
        raise RuntimeError(f"nothing to resume in {run_dir}: it has no checkpoint{why}; start it again with "
                           "menger train")
    if checkpoint != "latest":  # a choice that is not there is refused before the run directory changes
        CheckpointManager(Path(run_dir) / "checkpoints").find(checkpoint)
    return run_experiment(cfg, Path(run_dir), resume=True, progress=progress, observers=observers,
                          log_lines=log_lines, checkpoint=checkpoint)


Observations = Union[npt.ArrayLike, Mapping[str, npt.ArrayLike]]
"""One observation or a batch [N, ...] of them: an array (or what numpy makes one of), or a mapping of such for
a Dict observation space."""


class Policy:
    """A trained policy for evaluation or deployment: `act(obs_batch) -> actions` (numpy in, numpy out)."""

    def __init__(self, network: Any, config: ExperimentConfig, checkpoint: dict[str, Any] | None = None):
        """`network`: what `menger.models.build_policy` built for the run's algorithm (each has `act`,
        `initial_state`, `lstm_size`, `codec`, `obs_space`; their classes differ by algorithm). `checkpoint`: where
        the parameters came from (its step and path, and for the best the evaluation that made it the best)."""
        self.network: Any = network.eval()
        self.config = config
        self.checkpoint: dict[str, Any] = checkpoint or {}
        self.state: torch.Tensor | None = None
        self.generator: torch.Generator | None = None  # sampled actions' randomness (None: torch's global one)

    def act(self, obs: Observations, deterministic: bool = True) -> Any:
        """Actions for a batch of observations [N, *obs_shape] (or a dict of such), or for one observation
        (*obs_shape: the action alone comes back), in the env's action space: an array [N, ...] (Box actions
        clipped to the bounds), or a list of N tuples or dicts for a Tuple or Dict space. A recurrent policy keeps
        its state per env (row) from call to call; call `reset_state(done)` where episodes ended. A batch of another
        size starts from a zero state."""
        from menger.models import obs_to_tensors

        if self._single(obs):
            return self.act({k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, Mapping)
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

    def _single(self, obs: Observations) -> bool:
        """One observation rather than a batch: its shape is the observation space's own."""
        import gymnasium as gym

        space = self.network.obs_space
        if isinstance(space, gym.spaces.Dict) and isinstance(obs, Mapping):
            return all(np.shape(obs[key]) == sub.shape for key, sub in space.spaces.items() if key in obs)
        return not isinstance(obs, Mapping) and np.shape(obs) == space.shape

    def reset_state(self, done: npt.ArrayLike | None = None) -> None:
        """Zero the recurrent state of envs whose episode ended: `done` [N] of bools for a batch, one bool for
        a single observation, None for all of them (a new set of episodes)."""
        if done is None:
            self.state = None
        elif self.state is not None and self.state.numel():
            keep = 1.0 - np.asarray(done, dtype=np.float32).reshape(-1)
            self.state = self.state * torch.from_numpy(keep).unsqueeze(-1)


def load_policy(run_dir: str | Path, allow_import: Sequence[str] = (), *, env: EnvSource | None = None,
                network: NetworkSource | None = None, checkpoint: str | int = "latest") -> Policy:
    """The run's policy from its newest valid checkpoint, or from `checkpoint`: "best" (the one with the best
    deterministic evaluation, `checkpoint.keep_best`) or a step (the learner's update count, `ckpt-STEP`); one that
    is not there is refused listing those that are; `Policy.checkpoint` says which it was. `allow_import`: modules
    outside Menger its config may import; `env`, `network`: the objects a run trained with
    `train(env=..., network=...)` needs again (`load_run_config`)."""
    from menger.envs import make_vec_env
    from menger.models import build_policy

    cfg = load_run_config(run_dir, allow_import, env=env, network=network)
    manager = CheckpointManager(Path(run_dir) / "checkpoints")
    if checkpoint == "latest":
        chosen = manager.load_latest()
        if chosen is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint yet; train longer or wait for the first checkpoint")
    else:
        chosen = manager.load(checkpoint)
    probe = make_vec_env(cfg.env.id, 1, seed=0, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset,
                         wrappers=cfg.env.wrappers, multiagent=cfg.env.multiagent)
    network = build_policy(probe.single_observation_space, probe.single_action_space, cfg.model, cfg.algo,
                           cfg.env.normalize)
    probe.close()
    state = unflatten_state(chosen.tensors, chosen.metadata)
    network.load_state_dict(state["learner"]["model"])
    best = manager.best() if checkpoint == "best" else None  # BEST.json records it too (a step saved before)
    return Policy(network, cfg, {"step": chosen.step, "path": str(chosen.path),
                                 "evaluation": chosen.metadata.get("evaluation") or best})


class RunPlayer:
    """A trained multi-agent policy as a player (`menger match`, a user's own games): `act(observation,
    action_mask, agent=None) -> action`, with one agent's observation in PettingZoo's format. `agent` (its name)
    matters only to a policy that tells teammates apart (`env.multiagent.agent_id`)."""

    def __init__(self, policy: Policy, sides: Sequence[Sequence[str]], deterministic: bool = True, seed: int = 0):
        self.policy, self.sides, self.deterministic = policy, sides, deterministic
        self.space = policy.network.obs_space
        if not deterministic:  # sampled actions drawn from a seeded generator: a match replays from its --seed
            policy.generator = torch.Generator().manual_seed(int(seed))

    def act(self, observation: Any, action_mask: npt.ArrayLike | None = None, agent: str | None = None) -> Any:
        return self.policy.act(self._rows([observation], [action_mask], [agent]), self.deterministic)[0]

    def priors_and_values(self, observations: Sequence[Any], action_masks: Sequence[Any],
                          agents: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """For a batch of positions: the policy's probabilities over the actions (illegal ones 0) [n, A] and its
        value [n] from the view of the agent to move (what search at play time asks of the network)."""
        from menger.models import obs_to_tensors

        network = self.policy.network
        if network.lstm_size:
            raise ValueError("search needs a feed-forward policy: this run's network is recurrent")
        rows = obs_to_tensors(self._rows(observations, action_masks, agents))
        with torch.no_grad():
            logits, values, _ = network({key: value.float() for key, value in rows.items()})
        return torch.softmax(logits, -1).numpy(), values.numpy()

    def _rows(self, observations: Sequence[Any], action_masks: Sequence[Any], agents: Sequence[str | None]) -> dict:
        """The policy's input for a batch of one agent's observations in PettingZoo's format."""
        from menger.envs.multiagent import AGENT_KEY, CRITIC_KEY, MASK_KEY, OBS_KEY

        obs, masks = [], []
        for observation, action_mask in zip(observations, action_masks):
            if isinstance(observation, dict) and OBS_KEY in observation:
                action_mask = observation.get(MASK_KEY, action_mask)
                observation = observation[OBS_KEY]
            obs.append(np.asarray(observation))
            masks.append(action_mask)
        n = len(obs)
        rows = {OBS_KEY: np.stack(obs)}
        for key, sub in self.space.spaces.items():
            if key == MASK_KEY:
                rows[key] = np.stack([np.ones(sub.shape, np.int8) if mask is None else np.asarray(mask)
                                      for mask in masks])
            elif key == AGENT_KEY:
                index = [next((side.index(agent) for side in self.sides if agent in side), 0) for agent in agents]
                rows[key] = np.eye(sub.shape[0], dtype=np.float32)[index]
            elif key == CRITIC_KEY:  # the centralised critic's input: acting does not read it
                rows[key] = np.zeros((n, *sub.shape), np.float32)
        return rows

    def reset(self) -> None:
        self.policy.reset_state()


def run_player(run_dir: str | Path, policy: str | None = None, allow_import: Sequence[str] = (), seed: int = 0,
               deterministic: bool | None = None, search: int = 0, rollouts: float = 0.0) -> Any:
    """The newest policy of a multi-agent run as a `RunPlayer`. A league run has one per learner: `policy` names
    it (default: its first main agent). ``deterministic=True``: it takes its most likely action; ``False``: it
    samples, from a generator seeded by `seed`; ``None``: as its config's `env.multiagent.match_actions` says.
    ``search=N``: a `menger.search.SearchPlayer` that plays through PUCT search of N simulations a move, with the
    policy's prior and value (Connect Four, Tic-Tac-Toe: its `act` needs the game's env as `env=`); ``rollouts=W``:
    its leaves' values mix in random playouts' outcomes with weight W (AlphaGo's), the playouts seeded by `seed`."""
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
    player = RunPlayer(loaded, sides, deterministic, seed)
    if search:
        from menger.search import SearchPlayer

        return SearchPlayer(player, search, rollouts=rollouts, seed=seed)
    return player
