"""The experiment: one small, frozen, documented config per component, validated before anything starts.

An experiment file (YAML) is a mapping with these sections; every key is optional except where noted.
`menger train PRESET --set ppo.lr=1e-3` overrides any key; an unknown key is an error naming the closest one.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import re
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, Optional, Union

from menger import registry
from menger.config import ConfigError, apply_overrides, field, from_dict, load_yaml, to_dict, validate

log = logging.getLogger("menger.config")


@dataclass(frozen=True)
class NormalizeConfig:
    obs: bool = field(False, doc="normalise Box observations by their running mean and std, merged over every actor "
                      "(SB3's VecNormalize); the statistics are part of the policy: checkpoints, eval, export")
    reward: bool = field(False, doc="scale training rewards by the running std of the discounted return; reported "
                         "episode returns stay raw")
    clip_obs: float = field(10.0, min=0.0, doc="clip normalised observations to [-x, x]")
    clip_reward: float = field(10.0, min=0.0, doc="clip scaled rewards to [-x, x]")
    gamma: Optional[float] = field(None, min=0.0, max=1.0, doc="discount of the return whose std scales rewards; "
                                   "None: the algorithm's (ppo.gamma, vtrace.gamma)")
    epsilon: float = field(1e-8, min=0.0, doc="added to variances before the square root")

    @property
    def active(self) -> bool:
        return self.obs or self.reward


def wrapper_spec(item) -> tuple[str, dict]:
    """('package.module:Wrapper', kwargs) of an `env.wrappers` entry: a string, or {class: ..., **kwargs}."""
    if isinstance(item, str):
        return item, {}
    kwargs = dict(item)
    return kwargs.pop("class"), kwargs


@dataclass(frozen=True)
class MultiAgentConfig:
    """A PettingZoo env (AEC or Parallel, `env.id: package.module:factory`): which of its agents the learned policy
    plays. Every other agent is an opponent, played inside the actor's envs (`menger.envs.multiagent`): by the
    league's choice (`league`), else by `opponent`."""

    learn: tuple[str, ...] = field((), doc="names or fnmatch patterns of the agents the policy plays (player_0, "
                                   "'red_*'); empty = the env's first agent. Rows: runtime.envs_per_actor counts "
                                   "them, so it is games x learned agents per game")
    swap_seats: bool = field(False, doc="the policy changes sides every game (player_0, then player_1; red, then "
                             "blue), so it learns every seat: both sides need the same spaces")
    agent_id: bool = field(False, doc="add a one-hot of the agent's index on its side (observation key agent_id): "
                           "shared parameters that still tell teammates apart")
    critic: Literal["local", "state", "team"] = field(
        "local", doc="what the value function sees beyond the agent's observation: local (nothing), state (the "
        "env's global state()), team (every teammate's observation): a centralised critic (MAPPO)")
    random_opening: int = field(0, min=0, doc="turn-based (AEC) games: each training game opens with 0 to this many "
                                "uniformly random legal moves (both sides, the count uniform too) before the players "
                                "take over, so the policy meets the scattered positions a weak player leaves and the "
                                "league's opponents punish its mistakes there. Matches (menger match) never do")
    opponent: str = field("random", doc="who plays the other agents when no league chooses: random, "
                          "alphabeta:DEPTH (Connect Four), bot:NAME (the env's scripted bots), run:PATH (another "
                          "run's newest policy, frozen: e.g. the main agent an exploiter is trained against)")
    match_actions: Literal["most_likely", "sampled"] = field(
        "most_likely", doc="how menger match and menger.api.run_player play the trained policy unless told "
        "(--stochastic, --most-likely): its most likely action, or one sampled as in training, from a generator "
        "seeded by the match's --seed")


@dataclass(frozen=True)
class EnvConfig:
    id: str = field("CartPole-v1", doc="a gymnasium id (e.g. CartPole-v1, ALE/Pong-v5) or 'package.module:ClassOrFactory'")
    kwargs: dict = field(default_factory=dict, doc="keyword arguments for the environment's constructor")
    preset: Optional[Literal["atari"]] = field(None, doc="'atari': ALE with frame skip 4, 84x84 grey, stack 4")
    nonfinite: Literal["drop", "fail"] = field("drop", doc="NaN/Inf from the env: drop the transition and count it, or fail")
    num_threads: int = field(1, min=1, doc="threads per actor for envs that step in C++ threads (ALE)")
    wrappers: tuple[Union[str, dict], ...] = field(
        (), doc="gymnasium wrappers applied to each env, in order: 'package.module:Wrapper', or {class: "
        "'package.module:Wrapper', <its kwargs>} (e.g. {class: 'gymnasium.wrappers:TimeLimit', "
        "max_episode_steps: 200})")
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig, doc="running observation and reward "
                                       "normalisation (ppo, impala, appo)")
    multiagent: MultiAgentConfig = field(default_factory=MultiAgentConfig, doc="PettingZoo envs: the agents the "
                                         "policy plays, and what its value function sees")

    def __post_init__(self):
        for index, item in enumerate(self.wrappers):
            key = f"env.wrappers[{index}]"
            if isinstance(item, dict) and not isinstance(item.get("class"), str):
                raise ConfigError(f"{key} = {item!r}: a wrapper with arguments is a mapping with a 'class' key, "
                                  "e.g. {class: 'gymnasium.wrappers:TimeLimit', max_episode_steps: 200}")
            name, _ = wrapper_spec(item)
            module, _, attribute = name.partition(":")
            if not module.strip() or not attribute.strip():
                raise ConfigError(f"{key} = {name!r}: name a wrapper as 'package.module:Wrapper', e.g. "
                                  "'gymnasium.wrappers:ClipAction'")
        if self.wrappers and self.preset is not None:
            raise ConfigError(f"env.wrappers with env.preset={self.preset!r}: the preset is a vector env with its own "
                              "preprocessing, not single envs to wrap; unset one of them")


@dataclass(frozen=True)
class ModelConfig:
    encoder: Literal["auto", "mlp", "cnn", "cnn_shallow", "board"] = field(
        "auto", doc="auto: a Nature CNN for [C,H,W] images, else an MLP; cnn_shallow: IMPALA's shallow CNN (3x "
        "cheaper); board: 3x3 convolutions that keep the size of an [H,W,C] board (PettingZoo's classic games), "
        "then the MLP")
    hidden: tuple[int, ...] = field((64, 64), doc="MLP layer sizes (the CNN uses the last one for its dense layer)")
    board_channels: tuple[int, ...] = field((64, 64), doc="encoder board: the channels of each 3x3 convolution")
    board_mirror: bool = field(False, doc="encoder board with one action per column (Connect Four): the policy and "
                               "value of the board mirrored left to right are those of the board, with the "
                               "actions mirrored too (each forward reads both and averages them: twice the cost)")
    activation: Literal["tanh", "relu"] = field("tanh", doc="MLP activation")
    lstm_size: int = field(0, min=0, doc="size of an LSTM core after the encoder; 0 = no recurrent core")
    separate_value: bool = field(True, doc="give the value head its own MLP encoder (MLP encoders only)")
    init_log_std: float = field(0.0, doc="initial log standard deviation of Gaussian (Box) actions")
    network: Optional[str] = field(None, doc="a custom torch module 'package.module:Class': an encoder (with "
                                   "features_dim) or a whole policy network; see docs/models.md")
    kwargs: dict = field(default_factory=dict, doc="keyword arguments for the custom network")
    dueling: bool = field(True, doc="apex: dueling value and advantage heads (Wang et al. 2016)")
    agents: int = field(0, min=0, doc="ppo, impala, appo: 0 = one network for every row (shared parameters; an "
                        "agent_id observation entry is an input like the others); K > 0 = K independent networks, "
                        "each row acting and learning with the one its one-hot agent_id [K] entry names; see "
                        "docs/models.md")

    def __post_init__(self):
        if self.agents and self.lstm_size:
            raise ConfigError(f"model.agents={self.agents} with model.lstm_size={self.lstm_size}: independent agents' "
                              "networks are feed-forward; unset model.lstm_size, or share one recurrent network "
                              "(model.agents=0, the agent_id entry an input of it)")
        if not self.board_channels or any(size < 1 for size in self.board_channels):
            raise ConfigError(f"model.board_channels={list(self.board_channels)}: give one channel count >= 1 per "
                              "convolution, e.g. model.board_channels=[64,64]")
        if self.board_mirror and self.encoder != "board":
            raise ConfigError(f"model.board_mirror=true mirrors the board of model.encoder=board; model.encoder is "
                              f"{self.encoder!r}: set model.encoder=board, or unset model.board_mirror")
        if any(size < 1 for size in self.hidden):
            raise ConfigError(f"model.hidden={list(self.hidden)}: every layer needs at least one unit; "
                              "write the sizes you want, e.g. model.hidden=[64,64]")


@dataclass(frozen=True)
class ReplayConfig:
    """The replay between actors and learner (apex, r2d2, sac): its size, sampler, rate limiter and batches."""

    max_size: int = field(100_000, min=1, doc="items the replay holds (transitions; r2d2: sequences); the oldest "
                          "chunks go first")
    sampler: Literal["prioritized", "uniform"] = field("prioritized", doc="how the learner samples")
    alpha: float = field(0.6, min=0.0, doc="prioritized: sampling probability ~ priority^alpha")
    beta: float = field(0.4, min=0.0, doc="prioritized: importance-weight exponent")
    batch_size: int = field(256, min=1, doc="items per learner update")
    samples_per_insert: float = field(8.0, min=0.0, doc="the rate limiter's target of sampled items per inserted "
                                      "item (0 = no ratio: the learner samples as fast as it can)")
    error_buffer: float = field(0.0, min=0.0, doc="how far samples may run ahead of or behind the ratio, in "
                                "samples; 0 = two learner batches plus two unrolls' worth")
    min_size: int = field(1_000, min=1, doc="items in the replay before the first sample")
    shards: int = field(1, min=1, doc="independent replay shards; actor i writes into shard i % shards (on Ray: "
                        "node k's actors into k % shards)")
    publish_every: int = field(1, min=1, doc="updates between parameter publishes to the actors (Ape-X's actors "
                               "copy new parameters every 400 steps or so; each publish costs a copy)")
    lockstep: bool = field(False, doc="one unroll, then exactly the updates it pays for, in turn: deterministic "
                           "(for tests and exact-resume checks; slower)")


@dataclass(frozen=True)
class LeagueConfig:
    """Self-play against one's own snapshots, or an AlphaStar league of main agents and exploiters."""

    mode: Literal["none", "selfplay", "league"] = field(
        "selfplay", doc="none: no league (a multi-agent env plays env.multiagent.opponent); selfplay: one main agent plays its own snapshots (league.opponent says which); league: "
        "main agents, main exploiters and league exploiters (AlphaStar)")
    opponent: Literal["latest", "uniform", "pfsp"] = field(
        "latest", doc="selfplay: the opponent of each game: latest (the newest snapshot), uniform (any snapshot or "
        "fixed opponent), pfsp (PFSP over them, weighted by league.pfsp_weighting); before the first snapshot the "
        "learner plays itself")
    main_agents: int = field(1, min=1, doc="league: learners that play everyone (selfplay: exactly 1)")
    main_exploiters: int = field(0, min=0, doc="league: learners that play the current main agents to find their "
                                 "weaknesses, reset to their initial parameters at every snapshot (AlphaStar: 1 "
                                 "per main agent)")
    league_exploiters: int = field(0, min=0, doc="league: learners that play every snapshot by PFSP, reset with "
                                   "probability league.reset_probability at a snapshot (AlphaStar: 2 per main agent)")
    fixed_opponents: tuple[str, ...] = field(
        (), doc="opponents that never learn, each a spec the runtime knows how to build (e.g. 'bot:random', "
        "'alphabeta:2'); they play like snapshots: in PFSP and in the snapshot rules")
    fixed_share: float = field(0.0, min=0.0, max=1.0, doc="selfplay with opponent uniform or pfsp: this share of the "
                               "games goes to the fixed opponents, evenly, and the rest to the snapshots as "
                               "league.opponent says (0: fixed opponents are drawn like snapshots, so one the "
                               "agent beats is soon hardly played)")
    main_mix: tuple[float, ...] = field(
        (0.5, 0.35, 0.15), doc="league: the main agents' share of games by branch: PFSP over all snapshots, "
        "self-play against the current main agents, verification (exploiter snapshots it loses to, then its own "
        "forgotten snapshots; self-play when there are none); sums to 1")
    pfsp_weighting: Literal["hard", "var", "linear", "linear_capped"] = field(
        "hard", doc="PFSP's f(win rate) where the opponent should be hard: hard (1-p)^2, var p(1-p), linear 1-p, "
        "linear_capped min(0.5, 1-p); the curriculum branches (an opponent too strong to learn from) always use var")
    snapshot_win_rate: float = field(0.7, min=0.0, max=1.0, doc="a learner is snapshotted when its win rate against "
                                     "every relevant opponent exceeds this (after league.min_snapshot_steps); main "
                                     "agents also verify their snapshots they beat less often than this")
    curriculum_win_rate: float = field(0.3, min=0.0, max=1.0, doc="league: a main agent that wins less than this "
                                       "against a main agent plays that agent's snapshots instead (PFSP var), and "
                                       "verifies exploiter snapshots it wins less than this against")
    exploiter_min_win_rate: float = field(0.2, min=0.0, max=1.0, doc="league: a main exploiter that wins less than "
                                          "this against a main agent plays that agent's snapshots instead (PFSP "
                                          "var; DI-engine's min_valid_win_rate, AlphaStar 0.1)")
    reset_probability: float = field(0.25, min=0.0, max=1.0, doc="league: chance that a league exploiter goes back "
                                     "to its initial parameters at a snapshot (main exploiters always do)")
    min_snapshot_steps: int = field(100_000, min=0, doc="steps a learner trains after a snapshot before the next "
                                    "one may be taken")
    snapshot_steps: int = field(200_000, min=1, doc="steps after which a learner is snapshotted whatever its win "
                                "rates (the step budget; AlphaStar: twice the minimum)")
    payoff_decay: float = field(0.99, min=0.0, max=1.0, doc="each game of a pair first multiplies that pair's win, "
                                "draw and loss counts by this (0 is refused: it would forget the game being added)")
    min_games: int = field(8, min=0, doc="a pair's win rate reads 0.5 until it has played this many games")
    elo_k: float = field(32.0, min=0.0, doc="Elo: rating points a game can move (k); the scale is 400")
    publish_s: float = field(2.0, min=0.0, doc="seconds between refreshes of a learner's opponent table and of the "
                             "parameters it is played with as a current learner (snapshots are taken when due)")
    elo_initial: float = field(1000.0, doc="Elo of a new learner or fixed opponent (a snapshot starts at its "
                               "learner's rating)")

    def __post_init__(self):
        validate(self, path="league")
        problems = []
        if self.mode == "selfplay" and (self.main_agents != 1 or self.main_exploiters or self.league_exploiters):
            problems.append(f"league.mode=selfplay has one main agent and no exploiters, got main_agents="
                            f"{self.main_agents}, main_exploiters={self.main_exploiters}, league_exploiters="
                            f"{self.league_exploiters}; set league.mode=league for those")
        if len(self.main_mix) != 3 or min(self.main_mix) < 0 or not math.isclose(sum(self.main_mix), 1.0,
                                                                                 abs_tol=1e-6):
            problems.append(f"league.main_mix={list(self.main_mix)}: three shares (pfsp, self-play, verification), "
                            "each >= 0, that sum to 1, e.g. [0.5, 0.35, 0.15]")
        if self.snapshot_steps < self.min_snapshot_steps:
            problems.append(f"league.snapshot_steps={self.snapshot_steps} < league.min_snapshot_steps="
                            f"{self.min_snapshot_steps}: the step budget must be at least the minimum")
        if self.payoff_decay <= 0.0:
            problems.append("league.payoff_decay=0 would forget every game as it is added; use a value in (0, 1]")
        if len(set(self.fixed_opponents)) != len(self.fixed_opponents) or not all(
                spec.strip() for spec in self.fixed_opponents):
            problems.append(f"league.fixed_opponents={list(self.fixed_opponents)}: each spec must be a non-empty "
                            "name, given once")
        if problems:
            raise ConfigError(problems)


@dataclass(frozen=True)
class EvalConfig:
    """A deterministic evaluation during training on its own envs (greedy for apex, the mean action for sac)."""

    interval_s: Optional[float] = field(None, min=0.0, doc="seconds of training between evaluations (written as "
                                        "eval/return_mean, eval/length_mean, ...); None = 5 for apex, r2d2 and sac, "
                                        "whose stop.target_return reads it, off for on-policy algorithms (whose "
                                        "target reads the training episodes even when it is on); 0 = off")
    episodes: int = field(10, min=1, doc="episodes per evaluation (run side by side, one env each)")
    max_steps: int = field(100_000, min=1, doc="steps per evaluation before it gives up on unfinished episodes")
    seed: int = field(10_000, doc="seed of the evaluation envs (the same episodes every evaluation)")
    video_interval_s: float = field(0.0, min=0.0, doc="seconds of training between videos of one deterministic "
                                    "episode (the env's own rgb_array render), written to RUN_DIR/videos/"
                                    "eval-<frames>.mp4 in a background thread; 0 = none")


@dataclass(frozen=True)
class RayConfig:
    """How the ray launcher places actors (read by `menger.launch.ray` only)."""

    address: Optional[str] = field(
        None, doc="'auto' or HOST:PORT joins a running cluster; unset starts a private local Ray instance for the run")
    actor_cpus: float = field(1.0, min=0.0, doc="CPUs each actor requests")
    actor_gpus: float = field(0.0, min=0.0, doc="GPUs each actor requests")
    max_actors: int = field(0, min=0, doc="runtime.actors=auto with an address (an elastic run): the most actors it "
                            "may grow to as nodes join; 0 = twice the actors picked at the start, at least 8")


@dataclass(frozen=True)
class CoordinationConfig:
    """Which unrolls the learner takes and when a batch is ready (read by `menger.coordinator` only)."""

    mode: Literal["auto", "sync", "async", "replay"] = field(
        "auto", doc="sync: every unroll of an update acted with the newest params; async: actors never wait on the "
        "learner; replay: unrolls go into the replay, batches are sampled from it. auto: sync for ppo, async for "
        "impala/appo, replay for apex/r2d2/sac")
    max_policy_lag: int = field(8, min=0, doc="async: unrolls older than this many versions are dropped and counted")
    slots_per_actor: int = field(2, min=1, doc="async, replay: unroll slots in flight per actor (back-pressure bound)")
    batch_unrolls: Union[int, Literal["auto"]] = field(
        0, min=0, doc="async: unrolls per learner batch; 0 = one per actor; auto: picked by a start-up measurement "
        "of this machine and adjusted during the run (docs: README, Sizing the runtime to the machine)")


@dataclass(frozen=True)
class SupervisionConfig:
    """When an actor counts as dead or stalled, and how often it is restarted (read by the ActorSupervisor)."""

    heartbeat_timeout_s: float = field(20.0, min=0.1, doc="an actor silent this long is replaced")
    startup_grace_s: float = field(120.0, min=0.1, doc="time an actor gets to start before heartbeats count")
    no_actor_deadline_s: float = field(60.0, min=0.1, doc="with no actor alive this long, training stops with an error")
    max_restarts: int = field(20, min=0, doc="restarts in a row (without a delivered unroll) before an actor is given up")


@dataclass(frozen=True)
class InferenceConfig:
    """Where actors' actions come from (read by the launcher's inference service)."""

    mode: Literal["local", "central"] = field(
        "local", doc="local: actors act on their cached params; central (SEED RL): actors send observations to one "
        "batched inference service on the learner's device")
    batch: int = field(0, min=0, doc="central: most actor requests in one forward; 0 = all actors")
    timeout_ms: float = field(2.0, min=0.0, doc="central: longest wait for more requests after the first")


@dataclass(frozen=True)
class LearnerResources:
    """The learner's devices, threads and data-parallel ranks (read by `menger.learners`)."""

    device: Literal["auto", "cpu", "cuda"] = field("auto", doc="learner device; auto = cuda when present")
    amp: bool = field(False, doc="mixed precision (bf16 autocast) in the learner")
    threads: int = field(0, min=0, doc="torch threads of the learner; 0 = cores minus local actors, at least 1")
    count: int = field(1, min=1, doc="data-parallel learners (torch.distributed: gloo on CPU, nccl on GPUs); each "
                       "takes a share of every batch's unrolls and gradients are averaged")
    collective_timeout_s: float = field(120.0, min=1.0, doc="count > 1: deadline of every collective; a learner "
                                        "silent this long ends the run with an error")
    mode: Literal["auto", "allreduce", "parameter_server"] = field(
        "auto", doc="allreduce: the learner computes gradients on batches of unrolls (count ranks all-reduce them); "
        "parameter_server: workers push gradients to a sharded server (runtime.parameter_server). auto: "
        "parameter_server for a3c, allreduce otherwise")


@dataclass(frozen=True)
class ParameterServerConfig:
    """The sharded parameter server of `runtime.learner.mode: parameter_server` (read by `menger.learners.a3c`)."""

    shards: int = field(1, min=1, doc="shards the parameters are split across by size, each with its own optimizer "
                        "state")
    update: Literal["sync", "async"] = field(
        "async", doc="sync: wait for one gradient from every worker, average them, apply; async: apply each "
        "gradient as it arrives")
    max_staleness: int = field(4, min=0, doc="async: a gradient computed on parameters more than this many versions "
                               "old is dropped and counted")


@dataclass(frozen=True)
class RuntimeConfig:
    """The actor fleet (what the launcher places) and one section per runtime component."""

    launcher: Literal["threads", "processes", "ray"] = field(
        "processes", doc="where actors run: threads or processes on this host, or Ray actors (pip install menger-rl[ray])")
    actors: Union[int, Literal["auto"]] = field(
        2, min=1, doc="number of actors; auto: the count that learns the most env frames/s on this machine, from a "
        "start-up measurement of at most 30 s (menger.runtime.autosize), written into the run's config.yaml")
    envs_per_actor: Union[int, Literal["auto"]] = field(
        16, min=1, doc="B: envs each actor steps as one batch; auto: picked with runtime.actors by the start-up "
        "measurement")
    unroll_length: int = field(32, min=1, doc="T: steps per unroll")
    seed: int = field(0, doc="seed of everything")
    ray: RayConfig = field(default_factory=RayConfig, doc="ray launcher: cluster address and actor resources")
    coordination: CoordinationConfig = field(default_factory=CoordinationConfig,
                                             doc="sync or async, policy lag, slots and batch size")
    supervision: SupervisionConfig = field(default_factory=SupervisionConfig,
                                           doc="heartbeats, restarts and the no-actor deadline")
    inference: InferenceConfig = field(default_factory=InferenceConfig, doc="local or central (SEED RL) inference")
    learner: LearnerResources = field(default_factory=LearnerResources,
                                      doc="learner device, threads and data-parallel ranks")
    parameter_server: ParameterServerConfig = field(default_factory=ParameterServerConfig,
                                                    doc="learner.mode parameter_server: shards, sync or async, "
                                                    "staleness bound")


# Where each key of the flat `runtime` section of earlier versions lives now. Run directories written by those
# versions keep loading, and old experiment files and --set overrides keep working, with a warning naming the new key.
LEGACY_RUNTIME_KEYS = {
    "ray_address": "ray.address", "ray_actor_cpus": "ray.actor_cpus", "ray_actor_gpus": "ray.actor_gpus",
    "max_policy_lag": "coordination.max_policy_lag", "slots_per_actor": "coordination.slots_per_actor",
    "batch_unrolls": "coordination.batch_unrolls",
    "heartbeat_timeout_s": "supervision.heartbeat_timeout_s", "startup_grace_s": "supervision.startup_grace_s",
    "no_actor_deadline_s": "supervision.no_actor_deadline_s", "max_restarts": "supervision.max_restarts",
    "inference_batch": "inference.batch", "inference_timeout_ms": "inference.timeout_ms",
    "device": "learner.device", "amp": "learner.amp", "learner_threads": "learner.threads",
    "learners": "learner.count", "collective_timeout_s": "learner.collective_timeout_s",
}
# Keys that were strings and are sections now: a plain value is the section's `mode`.
LEGACY_MODE_KEYS = {"coordination": "coordination.mode", "inference": "inference.mode"}


@dataclass(frozen=True)
class StopConfig:
    env_frames: Optional[int] = field(None, min=1, doc="stop after this many accepted env frames")
    wall_clock_s: Optional[float] = field(None, min=0.0, doc="stop after this many seconds of training")
    target_return: Optional[float] = field(None, doc="stop when the mean return of the last `window` episodes reaches it")
    window: int = field(20, min=1, doc="episodes in the mean return")
    max_invalid_fraction: float = field(
        0.5, min=0.0, max=1.0, doc="fail the run when more than this share of frames is lost to env faults (NaN "
        "values dropped, envs rebuilt), after 20 unrolls; 1 = never")
    max_nonfinite_updates: int = field(3, min=1, doc="fail the run after this many updates in a row with a "
                                       "non-finite loss (the parameters are lost; earlier checkpoints are kept)")

    def __post_init__(self):
        if self.env_frames is None and self.wall_clock_s is None and self.target_return is None:
            raise ConfigError("stop: give at least one of stop.env_frames, stop.wall_clock_s, stop.target_return")


@dataclass(frozen=True)
class CheckpointConfig:
    interval_s: float = field(10.0, min=0.0, doc="seconds between checkpoints (0 = only at the end): what a killed "
                              "learner can lose; a replay run writes its whole replay each time, so its presets "
                              "on large replays save less often")
    interval_updates: int = field(0, min=0, doc="updates between checkpoints (0 = by time only)")
    keep_last: int = field(3, min=1, doc="complete checkpoints kept")


@dataclass(frozen=True)
class WandbConfig:
    project: Optional[str] = field(None, doc="a Weights & Biases project: set, the run logs there too (pip install "
                                   "\"menger-rl[wandb]\"); unset (the default), nothing goes to W&B")
    entity: Optional[str] = field(None, doc="the W&B team or user the project belongs to (default: your own)")
    mode: Literal["online", "offline"] = field("online", doc="online: stream to W&B; offline: write to RUN_DIR/wandb "
                                               "and upload later with `wandb sync`")
    group: Optional[str] = field(None, doc="a W&B group for runs that belong together (seeds of one experiment)")
    tags: tuple[str, ...] = field((), doc="W&B tags of the run")


@dataclass(frozen=True)
class LogConfig:
    interval_s: float = field(1.0, min=0.05, doc="seconds between metric records")
    tensorboard: bool = field(True, doc="write TensorBoard event files")
    progress: bool = field(True, doc="live terminal progress display")
    wandb: WandbConfig = field(default_factory=WandbConfig,
                               doc="Weights & Biases (off unless log.wandb.project is set)")


class _Experiment:
    """The cross-field checks and resolved values of an experiment; `ExperimentConfig` below adds the fields.

    Every rule here is about the runtime; what an algorithm refuses or needs, it says in its registry entry
    (`menger.registry.Algorithm`: properties read here, and its own `problems`)."""

    def __post_init__(self):
        if self.auto_keys:
            self._check_auto()
        if self.tune:
            tune_spec(self)  # every tuned key and range checked before anything starts
        algorithm = self.algorithm
        replay = algorithm.learns_from == "replay"
        if replay != (self.coordination == "replay"):
            raise ConfigError(f"runtime.coordination.mode={self.runtime.coordination.mode!r} does not fit algo="
                              f"{self.algo!r}: {registry.listing(lambda a: a.learns_from == 'replay')} learn from "
                              "replay (mode replay or auto), "
                              f"{registry.listing(lambda a: a.learns_from == 'unrolls')} from unrolls as they come "
                              "(sync, async or auto)")
        problems = self._learner_problems() + self._model_problems() + list(algorithm.problems(self))
        if problems:
            raise ConfigError(problems)
        if self.env.normalize.active:
            self._check_normalize()
        learners = self.runtime.learner.count
        if learners > 1 and self.learner_mode == "allreduce":  # every learner needs a column per minibatch, or the
            # ranks would take different step counts
            smallest = self.batch_columns // learners
            needed = algorithm.minibatches(self)
            if smallest < needed:
                raise ConfigError(
                    f"runtime.learner.count={learners} leaves a learner {smallest} unroll column(s) of a "
                    f"{self.batch_columns}-column batch, fewer than the {needed} minibatch(es) it must step on; use "
                    "fewer learners, more runtime.envs_per_actor or a larger runtime.coordination.batch_unrolls")

    @property
    def algorithm(self) -> registry.Algorithm:
        """The registry entry of `algo` (`menger.algorithms`)."""
        return registry.get(self.algo)

    @property
    def auto_keys(self) -> tuple[str, ...]:
        """The runtime keys set to `auto`, which `menger.runtime.autosize` resolves before the run starts."""
        rt = self.runtime
        values = {"runtime.actors": rt.actors, "runtime.envs_per_actor": rt.envs_per_actor,
                  "runtime.coordination.batch_unrolls": rt.coordination.batch_unrolls}
        return tuple(key for key, value in values.items() if value == "auto")

    def _check_auto(self) -> None:
        """`auto` is measured for what the start-up measurement models: one unroll learner on this host."""
        rt, keys = self.runtime, ", ".join(f"{key}=auto" for key in self.auto_keys)
        fix = "; set them to numbers"
        problems = []
        if self.algorithm.learns_from == "replay" or self.learner_mode == "parameter_server":
            problems.append(f"{keys} with algo={self.algo!r}: auto-sizing models actors feeding one learner by "
                            f"unrolls ({registry.listing(lambda a: a.learns_from == 'unrolls')}); {self.algo}'s "
                            f"replay or gradient workers are not modelled{fix}")
        if rt.coordination.batch_unrolls == "auto" and self.coordination != "async":
            problems.append(f"runtime.coordination.batch_unrolls=auto with {self.coordination} coordination: only "
                            f"async coordination ({registry.listing(lambda a: a.coordination == 'async')}) batches "
                            "a number of unrolls; a sync round takes one unroll per actor, so leave batch_unrolls at 0")
        if rt.learner.count > 1:
            problems.append(f"{keys} with runtime.learner.count={rt.learner.count}: auto-sizing models one learner"
                            f"{fix}")
        if rt.inference.mode == "central":
            problems.append(f"{keys} with runtime.inference.mode=central: auto-sizing times inference on the "
                            f"actors (local){fix}")
        if self.league.mode == "league":
            problems.append(f"{keys} with league.mode=league: the league's learners share the machine, which the "
                            f"start-up measurement of one learner does not model{fix}")
        if problems:
            raise ConfigError(problems)

    def _check_normalize(self) -> None:
        if not self.algorithm.normalize:
            raise ConfigError(f"env.normalize with algo={self.algo!r}: running normalisation is built for "
                              f"{registry.listing(lambda a: a.normalize)}; unset env.normalize.obs and "
                              "env.normalize.reward")
        if self.runtime.learner.count > 1:
            raise ConfigError(f"env.normalize with runtime.learner.count={self.runtime.learner.count}: the running "
                              "statistics live with one learner; use runtime.learner.count=1")

    @property
    def normalize_gamma(self) -> float:
        """The discount of the return whose std scales rewards."""
        gamma = self.env.normalize.gamma
        if gamma is not None:
            return gamma
        return self.algorithm.gamma(self)

    def _learner_problems(self) -> list[str]:
        """The learner mode against what the algorithm supports, and what a parameter server refuses."""
        rt, algorithm, problems = self.runtime, self.algorithm, []
        if self.learner_mode == "parameter_server" and "parameter_server" not in algorithm.learner_modes:
            problems.append(f"runtime.learner.mode=parameter_server with algo={self.algo!r}: gradient workers are "
                            f"built for {registry.listing(lambda a: 'parameter_server' in a.learner_modes)}; train "
                            "it with runtime.learner.mode=allreduce (or auto)")
        if self.learner_mode == "parameter_server":
            if rt.inference.mode == "central":
                problems.append("runtime.inference.mode=central: an actor-learner computes its gradient on its own "
                                "copy of the parameters; use runtime.inference.mode=local")
            if self.env.normalize.active:
                problems.append("env.normalize with a parameter server: the running statistics live with one "
                                "learner that sees every batch; unset env.normalize.obs and env.normalize.reward")
        elif rt.learner.count > 1 and algorithm.learns_from == "replay":
            problems.append(f"runtime.learner.count={rt.learner.count}: {self.algo} trains with one learner; use "
                            "runtime.learner.count=1 (or algo "
                            f"{registry.listing(lambda a: a.gradient_learners)}, whose learners push gradients "
                            "to a parameter server)")
        return problems

    def _model_problems(self) -> list[str]:
        """What the model and inference sections ask that the algorithm's networks do not do."""
        algorithm, model, problems = self.algorithm, self.model, []
        if self.runtime.inference.mode == "central" and not algorithm.central_inference \
                and self.learner_mode != "parameter_server":
            problems.append(f"runtime.inference.mode=central: {self.algo}'s actors act on their cached parameters; "
                            "use runtime.inference.mode=local")
        if model.network and not algorithm.custom_network:
            problems.append(f"model.network: {self.algo} builds its own networks from model.encoder, model.hidden "
                            "and model.lstm_size; unset it")
        if model.agents and not algorithm.independent_agents:
            problems.append(f"model.agents={model.agents}: independent agents' networks are built for "
                            f"{registry.listing(lambda a: a.independent_agents)}; {self.algo} trains one network, "
                            "so unset model.agents (an agent_id observation entry is then an input of that one "
                            "network)")
        if model.lstm_size and not algorithm.recurrent:
            problems.append(f"model.lstm_size={model.lstm_size}: {self.algo} builds feed-forward networks; unset it, "
                            f"or use algo {registry.listing(lambda a: a.recurrent and a.actions == 'q')} for a "
                            "recurrent Q network")
        if model.board_mirror and not algorithm.board_mirror:
            problems.append(f"model.board_mirror=true is built into the policy network of "
                            f"{registry.listing(lambda a: a.board_mirror)}; algo {self.algo} builds its own "
                            "network without it: unset model.board_mirror")
        return problems

    @property
    def learner_mode(self) -> str:
        """The resolved `runtime.learner.mode`: 'allreduce' or 'parameter_server'."""
        mode = self.runtime.learner.mode
        if mode != "auto":
            return mode
        return self.algorithm.learner_modes[0]

    @property
    def coordination(self) -> str:
        """The resolved coordination mode: 'sync', 'async' or 'replay'."""
        mode = self.runtime.coordination.mode
        if mode != "auto":
            return mode
        if self.algorithm.learns_from == "replay":
            return "replay"
        if self.learner_mode == "parameter_server":
            return self.runtime.parameter_server.update
        return self.algorithm.coordination

    @property
    def eval_interval_s(self) -> float:
        """Seconds between deterministic evaluations during training; 0 = none."""
        interval = self.eval.interval_s
        if interval is None:
            return 5.0 if self.algorithm.evaluation == "greedy" else 0.0
        return interval

    @property
    def batch_columns(self) -> int:
        """Unroll columns (envs) in one learner batch: an unroll of every actor (sync), or `batch_unrolls` (async)."""
        rt = self.runtime
        if self.coordination == "sync":
            unrolls = rt.actors
        elif self.learner_mode == "parameter_server":
            unrolls = 1  # async: each gradient is applied as it arrives
        else:
            unrolls = rt.coordination.batch_unrolls or rt.actors
        return unrolls * rt.envs_per_actor


def _section_doc(section: str) -> str:
    users = registry.that(lambda a: section in a.sections)
    return f"settings of algo {', '.join(users)}"


def _experiment_fields() -> list[tuple]:
    """The fields of an experiment, in the order a config file lists them: what every run has, then each
    registered algorithm's section(s), then the runtime's sections."""
    before = [
        ("name", str, field("experiment", doc="name of the experiment (used in run directory names)")),
        ("algo", str, field("ppo", choices=registry.names(), doc="the algorithm: " + "; ".join(
            f"{a.name} ({a.summary.partition(': ')[2] or a.summary})" for a in registry.all_algorithms())
            + " (`menger.algorithms`; a package adds its own with an entry point)")),
        ("env", EnvConfig, field(default_factory=EnvConfig, doc="the environment")),
        ("model", ModelConfig, field(default_factory=ModelConfig, doc="the network")),
    ]
    sections = [(name, cls, field(default_factory=cls, doc=_section_doc(name)))
                for name, cls in registry.sections().items()]
    after = [
        ("replay", ReplayConfig, field(default_factory=ReplayConfig, doc="replay size, sampler and rate (algorithms "
                                       "that learn from replay: "
                                       f"{registry.listing(lambda a: a.learns_from == 'replay')})")),
        ("eval", EvalConfig, field(default_factory=EvalConfig, doc="deterministic evaluation during training")),
        ("league", LeagueConfig, field(default_factory=lambda: LeagueConfig(mode="none"), doc="multi-agent envs: "
                                       "self-play against snapshots, or an AlphaStar league of several learners")),
        ("runtime", RuntimeConfig, field(default_factory=RuntimeConfig, doc="actors, coordination, devices, "
                                         "liveness")),
        ("stop", StopConfig, field(default_factory=lambda: StopConfig(env_frames=1_000_000), doc="when to stop")),
        ("checkpoint", CheckpointConfig, field(default_factory=CheckpointConfig, doc="checkpoints")),
        ("log", LogConfig, field(default_factory=LogConfig, doc="metrics and progress")),
        ("tune", dict, field(default_factory=dict, doc="menger tune: the values to search, each a config key with "
                             "one of {log_uniform: [lo, hi]}, {uniform: [lo, hi]}, {int_uniform: [lo, hi]}, "
                             "{choice: [a, b, ...]}")),
    ]
    return before + sections + after


# The experiment: the fields every run has, and one section per registered algorithm (built once, when this module
# is imported, from the registry: a plug-in's section is here like a built-in one's).
ExperimentConfig = dataclasses.make_dataclass("ExperimentConfig", _experiment_fields(), bases=(_Experiment,),
                                              frozen=True, namespace={"__module__": __name__})
ExperimentConfig.__doc__ = ("An experiment: " + ", ".join(f.name for f in dataclasses.fields(ExperimentConfig))
                            + ". Checks and resolved values: `_Experiment`.")

# How a run is operated, not what it learns: left out of its hyperparameters.
OPERATIONAL_KEYS = ("eval", "checkpoint", "log", "runtime.supervision", "runtime.ray", "tune")


TUNE_KINDS = ("log_uniform", "uniform", "int_uniform", "choice")


@dataclass(frozen=True)
class Tuned:
    """One tuned key of `tune:`: its distribution (`kind`) and its bounds (`low`, `high`) or `choices`."""

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple = ()


def tune_spec(config: "ExperimentConfig") -> list[Tuned]:
    """The experiment's `tune:` section as `Tuned` entries, refused (ConfigError, every problem at once) where a
    key names no config value, a range is malformed, or a value it may take is one the config refuses."""
    data, problems, spec = to_dict(config), [], []
    data.pop("tune", None)
    for key, entry in _flat_tune(config.tune).items():
        where = f"tune.{key}"
        leaf = _leaf(data, str(key))
        if leaf is _MISSING or isinstance(leaf, dict):
            import difflib

            close = difflib.get_close_matches(str(key), _leaf_keys(data), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"{where}: {key!r} names no config value{hint} (`menger config` lists them)")
            continue
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in TUNE_KINDS:
            problems.append(f"{where}: give one distribution, e.g. {{log_uniform: [1e-4, 1e-2]}}; one of "
                            f"{', '.join(TUNE_KINDS)}; got {entry!r}")
            continue
        kind, bounds = next(iter(entry.items()))
        if kind == "choice":
            if not isinstance(bounds, list) or len(bounds) < 2:
                problems.append(f"{where}: choice needs a list of at least two values; got {bounds!r}")
                continue
            tuned, values = Tuned(str(key), kind, choices=tuple(bounds)), list(bounds)
        else:
            numeric = isinstance(bounds, list) and len(bounds) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            if not numeric or not bounds[0] < bounds[1]:
                problems.append(f"{where}: {kind} needs [low, high] with low < high; got {bounds!r}")
                continue
            if kind == "log_uniform" and bounds[0] <= 0:
                problems.append(f"{where}: log_uniform needs low > 0; got {bounds!r}")
                continue
            if kind == "int_uniform" and not all(isinstance(b, int) for b in bounds):
                problems.append(f"{where}: int_uniform needs whole numbers; got {bounds!r}")
                continue
            if isinstance(leaf, bool) or not isinstance(leaf, (int, float)) and leaf is not None:
                problems.append(f"{where}: {key} holds {leaf!r}, not a number; tune it with choice")
                continue
            tuned, values = Tuned(str(key), kind, float(bounds[0]), float(bounds[1])), list(bounds)
        for value in values:  # each end of the range (each choice) must make a valid experiment
            try:
                from_dict(ExperimentConfig, apply_overrides(data, [f"{key}={_yaml_text(value)}"]))
            except ConfigError as exc:
                problems.append(f"{where}: {key}={value!r} is refused by the config: {exc}")
                break
        else:
            spec.append(tuned)
    if problems:
        raise ConfigError(problems)
    return spec


_MISSING = object()


def _flat_tune(tune: dict, prefix: str = "") -> dict:
    """`{ppo.lr: {...}}` and `{ppo: {lr: {...}}}` (what `--set tune.ppo.lr=...` makes) alike: dotted key ->
    distribution."""
    out = {}
    for key, entry in tune.items():
        nested = isinstance(entry, dict) and entry and not any(kind in entry for kind in TUNE_KINDS)
        if nested and all(isinstance(inner, dict) for inner in entry.values()):
            out.update(_flat_tune(entry, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = entry
    return out


def _leaf(data: dict, key: str):
    node = data
    for name in key.split("."):
        if not isinstance(node, dict) or name not in node:
            return _MISSING
        node = node[name]
    return node


def _leaf_keys(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out += _leaf_keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def _yaml_text(value) -> str:
    import json

    return json.dumps(value)


def hyperparameters(config: ExperimentConfig) -> dict[str, bool | int | float | str]:
    """The settings that make one run differ from another, as flat dotted keys with scalar values, for comparing
    runs (TensorBoard's HParams tab): name, algo, env, model, the algorithm's own section(s) (and `replay` for one
    that learns from replay), runtime and stop, without the other algorithms' sections and `OPERATIONAL_KEYS`.
    Lists become their text (`model.hidden: "[64, 64]"`), mappings their own dotted keys (`env.kwargs.netlist`);
    unset (None) keys are left out."""
    algorithm = config.algorithm
    unread = set(registry.sections()) - set(algorithm.sections)
    if algorithm.learns_from != "replay":
        unread.add("replay")
    data = {key: value for key, value in to_dict(config).items() if key not in unread}
    flat: dict[str, bool | int | float | str] = {}

    def visit(prefix: str, value) -> None:
        if prefix in OPERATIONAL_KEYS or value is None:
            return
        if isinstance(value, dict):
            for key, inner in value.items():
                visit(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, (bool, int, float, str)):
            flat[prefix] = value
        else:
            flat[prefix] = str(list(value) if isinstance(value, tuple) else value)

    visit("", data)
    return flat


def preset_dir() -> Path:
    return Path(str(resources.files("menger") / "presets"))


def preset_files() -> dict[str, Path]:
    """Preset name -> its file: Menger's own (`menger/presets`), then those a plug-in algorithm ships in the
    `presets/` folder beside its spec (a name Menger already has is not replaced)."""
    files = {path.stem: path for path in sorted(preset_dir().glob("*.yaml"))}
    for algorithm in registry.all_algorithms():
        folder = algorithm.preset_dir
        for path in sorted(folder.glob("*.yaml")) if folder is not None else ():
            files.setdefault(path.stem, path)
    return files


def list_presets() -> dict[str, str]:
    """Preset name -> its summary: the opening comment's first line, or, where that line breaks off
    mid-sentence (it ends in a comma or a word), the comment up to its first full stop or colon."""
    out = {}
    for path in sorted(preset_files().values(), key=lambda p: p.stem):
        lines = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            lines.append(line.lstrip("# ").strip())
        summary = lines[0] if lines else ""
        if len(lines) > 1 and summary.endswith((",", ";")):
            text = " ".join(lines)
            end = re.search(r"[.:]\s", text)
            summary = text[:end.start()] if end else text
        out[path.stem] = summary
    return out


def load_experiment_data(source: str | dict, overrides: list[str] = ()) -> dict:
    """A preset name, a YAML path or a dict -> plain data with the --set overrides applied."""
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        if not path.suffix and not path.exists():
            path = preset_files().get(str(source), preset_dir() / f"{source}.yaml")
            if not path.exists():
                import difflib

                names = list(list_presets())
                close = difflib.get_close_matches(str(source), names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown preset {source!r}{hint} (presets: {', '.join(names)}; or give a YAML file)")
        elif not path.exists():
            raise ConfigError(f"experiment file {str(path)!r} does not exist")
        data = load_yaml(path)
    return apply_overrides(migrate_legacy_keys(data), [migrate_legacy_override(o) for o in overrides])


def load_experiment(source: str | dict, overrides: list[str] = ()) -> ExperimentConfig:
    return from_dict(ExperimentConfig, load_experiment_data(source, overrides))


def _warn_moved(old: str, new: str) -> None:
    log.warning("config key '%s' has moved to '%s'; the old name still works, but write the new one", old, new)


def _moved_provider_modules() -> dict[str, str]:
    """Module paths of earlier versions: the env providers (the applications) lived at `menger.envs.NAME`; each
    now lives where its `menger.env_providers` entry point says."""
    from importlib.metadata import entry_points

    return {f"menger.envs.{entry.name}": entry.value.split(":")[0]
            for entry in entry_points(group="menger.env_providers")}


def _migrate_module(value, moved: dict[str, str]):
    if isinstance(value, str):
        for old, new in moved.items():
            if value == old or value.startswith((old + ".", old + ":")):
                return new + value[len(old):]
    return value


def migrate_legacy_keys(data: dict) -> dict:
    """Experiment data with the keys and module paths of earlier versions moved to where they live now: the flat
    `runtime` keys into their sections (see the table), the applications' modules out of `menger.envs`."""
    data = dict(data)
    for section, key in (("env", "id"), ("model", "network")):
        value = data.get(section, {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and value.startswith("menger.envs."):
            data[section] = {**data[section], key: _migrate_module(value, _moved_provider_modules())}
    runtime = data.get("runtime")
    if not isinstance(runtime, dict):
        return data
    runtime = dict(runtime)
    for old, new in {**LEGACY_MODE_KEYS, **LEGACY_RUNTIME_KEYS}.items():  # modes first: they become sections
        if old not in runtime or (old in LEGACY_MODE_KEYS and isinstance(runtime[old], dict)):
            continue
        section, key = new.split(".")
        value = runtime.pop(old)  # for a mode key, `old` is the section's own name
        if not isinstance(runtime.get(section, {}), dict):
            runtime[old] = value
            continue  # a malformed section: from_dict names it
        runtime[section] = {**runtime.get(section, {}), key: value}
        _warn_moved(f"runtime.{old}", f"runtime.{new}")
    return {**data, "runtime": runtime}


def migrate_legacy_override(override: str) -> str:
    """`runtime.OLD=value` -> `runtime.NEW=value` for the keys in the table; anything else unchanged."""
    dotted, separator, value = override.partition("=")
    names = dotted.strip().split(".")
    if not separator or len(names) != 2 or names[0] != "runtime":
        return override
    new = LEGACY_RUNTIME_KEYS.get(names[1]) or LEGACY_MODE_KEYS.get(names[1])
    if new is None:
        return override
    _warn_moved(dotted.strip(), f"runtime.{new}")
    return f"runtime.{new}={value}"


# Names that lived here in earlier versions: each algorithm's section moved to its folder (menger.algorithms).
_MOVED = {"PPOConfig": "menger.algorithms.ppo.spec", "VTraceConfig": "menger.algorithms.impala.spec",
          "A3CConfig": "menger.algorithms.a3c.spec", "ApexConfig": "menger.algorithms.apex.spec",
          "GorilaConfig": "menger.algorithms.gorila.spec", "R2D2Config": "menger.algorithms.r2d2.spec",
          "SACConfig": "menger.algorithms.sac.spec"}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib

        warnings.warn(f"menger.experiment.{name} has moved to {_MOVED[name]}.{name}; the old path works for this "
                      "release only", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'menger.experiment' has no attribute {name!r}")
