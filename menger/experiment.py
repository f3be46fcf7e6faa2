"""The experiment: one small, frozen, documented config per component, validated before anything starts.

An experiment file (YAML) is a mapping with these sections; every key is optional except where noted.
`menger train PRESET --set ppo.lr=1e-3` overrides any key; an unknown key is an error naming the closest one.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, Optional

from menger.config import ConfigError, apply_overrides, field, from_dict, load_yaml


@dataclass(frozen=True)
class EnvConfig:
    id: str = field("CartPole-v1", doc="a gymnasium id (e.g. CartPole-v1, ALE/Pong-v5) or 'package.module:ClassOrFactory'")
    kwargs: dict = field(default_factory=dict, doc="keyword arguments for the environment's constructor")
    preset: Optional[Literal["atari"]] = field(None, doc="'atari': ALE with frame skip 4, 84x84 grey, stack 4")
    nonfinite: Literal["drop", "fail"] = field("drop", doc="NaN/Inf from the env: drop the transition and count it, or fail")
    num_threads: int = field(1, min=1, doc="threads per actor for envs that step in C++ threads (ALE)")


@dataclass(frozen=True)
class ModelConfig:
    encoder: Literal["auto", "mlp", "cnn", "cnn_shallow"] = field(
        "auto", doc="auto: a Nature CNN for [C,H,W] images, else an MLP; cnn_shallow: IMPALA's shallow CNN (3x cheaper)")
    hidden: tuple[int, ...] = field((64, 64), doc="MLP layer sizes (the CNN uses the last one for its dense layer)")
    activation: Literal["tanh", "relu"] = field("tanh", doc="MLP activation")
    lstm_size: int = field(0, min=0, doc="size of an LSTM core after the encoder; 0 = no recurrent core")
    separate_value: bool = field(True, doc="give the value head its own MLP encoder (MLP encoders only)")
    init_log_std: float = field(0.0, doc="initial log standard deviation of Gaussian (Box) actions")
    network: Optional[str] = field(None, doc="a custom torch module 'package.module:Class'; see docs/architecture.md")
    kwargs: dict = field(default_factory=dict, doc="keyword arguments for the custom network")


@dataclass(frozen=True)
class PPOConfig:
    lr: float = field(3e-4, min=0.0, doc="Adam learning rate")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    gae_lambda: float = field(0.95, min=0.0, max=1.0, doc="GAE lambda")
    clip: float = field(0.2, min=0.0, doc="PPO ratio clip")
    epochs: int = field(4, min=1, doc="passes over each batch")
    minibatches: int = field(4, min=1, doc="minibatches per epoch")
    value_coef: float = field(0.5, min=0.0, doc="value loss weight")
    entropy_coef: float = field(0.0, min=0.0, doc="entropy bonus weight")
    value_clip: Optional[float] = field(None, doc="clip the value update to this range around the old value (None: off)")
    normalize_advantages: bool = field(True, doc="normalise advantages per minibatch")
    max_grad_norm: float = field(0.5, min=0.0, doc="gradient norm clip")
    target_kl: Optional[float] = field(None, doc="stop an update's epochs early past this approximate KL")
    adam_eps: float = field(1e-5, min=0.0, doc="Adam epsilon")


@dataclass(frozen=True)
class VTraceConfig:
    lr: float = field(6e-4, min=0.0, doc="learning rate")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    optimizer: Literal["adam", "rmsprop"] = field("adam", doc="optimizer")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    lam: float = field(1.0, min=0.0, max=1.0, doc="V-trace lambda")
    clip_rho: float = field(1.0, min=0.0, doc="rho-bar: importance weight clip of the value targets")
    clip_pg_rho: float = field(1.0, min=0.0, doc="importance weight clip of the policy-gradient advantages")
    clip_c: float = field(1.0, min=0.0, doc="c-bar: trace cutting")
    value_coef: float = field(0.5, min=0.0, doc="value loss weight")
    entropy_coef: float = field(0.01, min=0.0, doc="entropy bonus weight")
    max_grad_norm: float = field(40.0, min=0.0, doc="gradient norm clip")
    reward_clip: Optional[float] = field(None, doc="clip rewards to [-x, x] (1.0 for Atari)")
    clip: float = field(0.2, min=0.0, doc="APPO only: PPO ratio clip")
    epochs: int = field(1, min=1, doc="APPO only: passes over each batch")
    minibatches: int = field(1, min=1, doc="minibatches (split along envs) per pass")
    normalize_advantages: bool = field(False, doc="APPO only: normalise advantages")
    adam_eps: float = field(1e-5, min=0.0, doc="optimizer epsilon")


@dataclass(frozen=True)
class RuntimeConfig:
    launcher: Literal["threads", "processes", "ray"] = field(
        "processes", doc="where actors run: threads or processes on this host, or Ray actors (pip install menger-rl[ray])")
    ray_address: Optional[str] = field(
        None, doc="ray: 'auto' or HOST:PORT joins a running cluster; unset starts a local Ray instance for the run")
    ray_actor_cpus: float = field(1.0, min=0.0, doc="ray: CPUs each actor requests")
    ray_actor_gpus: float = field(0.0, min=0.0, doc="ray: GPUs each actor requests")
    actors: int = field(2, min=1, doc="number of actors")
    envs_per_actor: int = field(16, min=1, doc="B: envs each actor steps as one batch")
    unroll_length: int = field(32, min=1, doc="T: steps per unroll")
    coordination: Literal["auto", "sync", "async"] = field(
        "auto", doc="sync: every unroll of an update acted with the newest params; async: actors never wait on the "
        "learner. auto: sync for ppo, async for impala/appo")
    max_policy_lag: int = field(8, min=0, doc="async: unrolls older than this many versions are dropped and counted")
    slots_per_actor: int = field(2, min=1, doc="async: unroll slots in flight per actor (back-pressure bound)")
    batch_unrolls: int = field(0, min=0, doc="async: unrolls per learner batch; 0 = one per actor")
    device: Literal["auto", "cpu", "cuda"] = field("auto", doc="learner device; auto = cuda when present")
    amp: bool = field(False, doc="mixed precision (bf16 autocast) in the learner")
    learner_threads: int = field(0, min=0, doc="torch threads of the learner; 0 = cores minus local actors, at least 1")
    heartbeat_timeout_s: float = field(20.0, min=0.1, doc="an actor silent this long is replaced")
    startup_grace_s: float = field(120.0, min=0.1, doc="time an actor gets to start before heartbeats count")
    no_actor_deadline_s: float = field(60.0, min=0.1, doc="with no actor alive this long, training stops with an error")
    max_restarts: int = field(20, min=0, doc="restarts in a row (without a delivered unroll) before an actor is given up")
    seed: int = field(0, doc="seed of everything")
    learners: int = field(1, min=1, doc="data-parallel learners (torch.distributed: gloo on CPU, nccl on GPUs); each "
                          "takes a share of every batch's unrolls and gradients are averaged")
    collective_timeout_s: float = field(120.0, min=1.0, doc="learners > 1: deadline of every collective; a learner "
                                        "silent this long ends the run with an error")
    inference: Literal["local", "central"] = field(
        "local", doc="local: actors act on their cached params; central (SEED RL): actors send observations to one "
        "batched inference service on the learner's device")
    inference_batch: int = field(0, min=0, doc="central: most actor requests in one forward; 0 = all actors")
    inference_timeout_ms: float = field(2.0, min=0.0, doc="central: longest wait for more requests after the first")


@dataclass(frozen=True)
class StopConfig:
    env_frames: Optional[int] = field(None, min=1, doc="stop after this many accepted env frames")
    wall_clock_s: Optional[float] = field(None, min=0.0, doc="stop after this many seconds of training")
    target_return: Optional[float] = field(None, doc="stop when the mean return of the last `window` episodes reaches it")
    window: int = field(20, min=1, doc="episodes in the mean return")

    def __post_init__(self):
        if self.env_frames is None and self.wall_clock_s is None and self.target_return is None:
            raise ConfigError("stop: give at least one of stop.env_frames, stop.wall_clock_s, stop.target_return")


@dataclass(frozen=True)
class CheckpointConfig:
    interval_s: float = field(60.0, min=0.0, doc="seconds between checkpoints (0 = only at the end)")
    interval_updates: int = field(0, min=0, doc="updates between checkpoints (0 = by time only)")
    keep_last: int = field(3, min=1, doc="complete checkpoints kept")


@dataclass(frozen=True)
class LogConfig:
    interval_s: float = field(1.0, min=0.05, doc="seconds between metric records")
    tensorboard: bool = field(True, doc="write TensorBoard event files")
    progress: bool = field(True, doc="live terminal progress display")


@dataclass(frozen=True)
class ExperimentConfig:
    name: str = field("experiment", doc="name of the experiment (used in run directory names)")
    algo: Literal["ppo", "impala", "appo"] = field("ppo", doc="ppo (sync), impala (V-trace), appo (PPO clip on V-trace)")
    env: EnvConfig = field(default_factory=EnvConfig, doc="the environment")
    model: ModelConfig = field(default_factory=ModelConfig, doc="the network")
    ppo: PPOConfig = field(default_factory=PPOConfig, doc="PPO settings (algo: ppo)")
    vtrace: VTraceConfig = field(default_factory=VTraceConfig, doc="IMPALA/APPO settings")
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig, doc="actors, coordination, devices, liveness")
    stop: StopConfig = field(default_factory=lambda: StopConfig(env_frames=1_000_000), doc="when to stop")
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig, doc="checkpoints")
    log: LogConfig = field(default_factory=LogConfig, doc="metrics and progress")

    @property
    def coordination(self) -> str:
        if self.runtime.coordination != "auto":
            return self.runtime.coordination
        return "sync" if self.algo == "ppo" else "async"


def preset_dir() -> Path:
    return Path(str(resources.files("menger") / "presets"))


def list_presets() -> dict[str, str]:
    """Preset name -> its first comment line."""
    out = {}
    for path in sorted(preset_dir().glob("*.yaml")):
        first = path.read_text().splitlines()[0] if path.stat().st_size else ""
        out[path.stem] = first.lstrip("# ").strip()
    return out


def load_experiment_data(source: str | dict, overrides: list[str] = ()) -> dict:
    """A preset name, a YAML path or a dict -> plain data with the --set overrides applied."""
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        if not path.suffix and not path.exists():
            path = preset_dir() / f"{source}.yaml"
            if not path.exists():
                import difflib

                names = list(list_presets())
                close = difflib.get_close_matches(str(source), names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown preset {source!r}{hint} (presets: {', '.join(names)}; or give a YAML file)")
        elif not path.exists():
            raise ConfigError(f"experiment file {str(path)!r} does not exist")
        data = load_yaml(path)
    return apply_overrides(data, list(overrides))


def load_experiment(source: str | dict, overrides: list[str] = ()) -> ExperimentConfig:
    return from_dict(ExperimentConfig, load_experiment_data(source, overrides))
