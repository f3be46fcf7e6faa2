"""The Python entry points: train an experiment, resume a run, load a trained policy."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from menger.checkpoint import CheckpointManager, unflatten_state
from menger.config import from_dict, load_yaml
from menger.experiment import ExperimentConfig, load_experiment, migrate_legacy_keys, migrate_legacy_override
from menger.launch import make_launcher
from menger.logging import JsonlLogger, MultiLogger, TensorBoardLogger, TerminalProgress
from menger.runtime import MetricsWriter, Trainer, TrainResult
from menger.runtime.rundir import RunDirectoryLock

RunResult = TrainResult


def default_run_dir(config: ExperimentConfig, root: str | Path = "runs") -> Path:
    return Path(root) / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _loggers(config: ExperimentConfig, run_dir: Path):
    loggers = [JsonlLogger(run_dir / "metrics.jsonl")]
    if config.log.tensorboard:
        loggers.append(TensorBoardLogger(run_dir / "tb"))
    return MultiLogger(*loggers)


def run_experiment(config: ExperimentConfig, run_dir: Path, *, resume: bool = False, progress: bool = False,
                   observers=()) -> TrainResult:
    """Train `config` into `run_dir` (or continue it: `resume`); `observers` get the trainer's hooks
    (`menger.runtime.Observer`)."""
    trainer = Trainer(config, run_dir, launcher=make_launcher(config.runtime), resume=resume,
                      observers=observers)  # refuses coordination that can never fill a batch, before any file
    with RunDirectoryLock(run_dir):  # one training process per run directory (refused naming the other's pid)
        logger = _loggers(config, run_dir)
        display = TerminalProgress(config.name, target_return=config.stop.target_return,
                                   total_frames=config.stop.env_frames, enabled=progress and config.log.progress) \
            if progress else None
        trainer.observers += [MetricsWriter(logger)] + ([MetricsWriter(display)] if display is not None else [])
        try:
            return trainer.run()
        finally:
            logger.close()
            if display is not None:
                display.close()


def train(config: str | dict | ExperimentConfig, overrides: list[str] = (), run_dir: str | None = None,
          progress: bool = False, observers=()) -> TrainResult:
    """Train a preset name, a YAML path, a dict or a config; returns the run directory and final metrics."""
    cfg = config if isinstance(config, ExperimentConfig) else load_experiment(config, list(overrides))
    path = Path(run_dir) if run_dir else default_run_dir(cfg)
    return run_experiment(cfg, path, progress=progress, observers=observers)


def load_run_config(run_dir: str | Path) -> ExperimentConfig:
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a Menger run directory (no config.yaml); give the directory "
                                "that `menger train` printed")
    return from_dict(ExperimentConfig, migrate_legacy_keys(load_yaml(path)))  # runs of earlier versions too


def resume(run_dir: str | Path, overrides: list[str] = (), progress: bool = False, observers=()) -> TrainResult:
    """Continue a run from its newest valid checkpoint (falling back, loudly, past a corrupt one)."""
    from menger.config import apply_overrides, to_dict

    cfg = load_run_config(run_dir)
    if overrides:
        overrides = [migrate_legacy_override(o) for o in overrides]
        cfg = from_dict(ExperimentConfig, apply_overrides(to_dict(cfg), overrides))
    return run_experiment(cfg, Path(run_dir), resume=True, progress=progress, observers=observers)


class Policy:
    """A trained policy for evaluation or deployment: `act(obs_batch) -> actions` (numpy in, numpy out)."""

    def __init__(self, network, config: ExperimentConfig):
        self.network, self.config = network.eval(), config
        self.state = None

    def act(self, obs, deterministic: bool = True) -> np.ndarray:
        from menger.models import obs_to_tensors

        tensors = obs_to_tensors(obs)
        if isinstance(tensors, dict):
            tensors = {k: v.float() for k, v in tensors.items()}
        batch = next(iter(tensors.values())).shape[0] if isinstance(tensors, dict) else tensors.shape[0]
        if self.network.lstm_size and (self.state is None or self.state.shape[1] != batch):
            self.state = self.network.initial_state(batch)
        out = self.network.act(tensors, self.state, deterministic=deterministic)
        self.state = out.state
        action = out.action.numpy()
        if not self.network.discrete:
            space = self.network.action_space
            action = np.clip(action, space.low, space.high)
        return action

    def reset_state(self, done: np.ndarray) -> None:
        """Zero the recurrent state of envs whose episode ended."""
        if self.state is not None and self.state.numel():
            self.state = self.state * torch.from_numpy(1.0 - done.astype(np.float32)).unsqueeze(-1)


def load_policy(run_dir: str | Path) -> Policy:
    from menger.envs import make_vec_env
    from menger.models import build_policy

    cfg = load_run_config(run_dir)
    checkpoint = CheckpointManager(Path(run_dir) / "checkpoints").load_latest()
    if checkpoint is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint yet; train longer or wait for the first checkpoint")
    probe = make_vec_env(cfg.env.id, 1, seed=0, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset)
    network = build_policy(probe.single_observation_space, probe.single_action_space, cfg.model)
    probe.close()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    network.load_state_dict(state["learner"]["model"])
    return Policy(network, cfg)
