"""The experiment's sections that every run has: the env, the model, the replay, the league, evaluation, the
runtime's components, when to stop, checkpoints and logging. Each is a small, frozen, documented config,
validated on construction; an algorithm's own section lives in its folder (`menger/algorithms/NAME/spec.py`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional, Union

from menger.config import ConfigError, field, validate


@dataclass(frozen=True)
class NormalizeConfig:
    obs: Union[bool, Literal["auto", "vector"]] = field(
        False, doc="normalise Box observations by their running mean and std, merged over every actor (SB3's "
        "VecNormalize); the statistics are part of the policy: checkpoints, eval, export. auto: on for continuous "
        "control (Box actions, float Box observations) where the algorithm normalises, off elsewhere; vector: "
        "also on for any actions when the observation is a vector of floats (a 1-D float Box: classic control, "
        "Box2D), never for images; decided when the run starts and saved so in its config.yaml")
    reward: Union[bool, Literal["auto"]] = field(
        False, doc="scale training rewards by the running std of the discounted return; reported episode returns "
        "stay raw. auto: on where the algorithm normalises (any action space), off elsewhere")
    clip_obs: float = field(10.0, min=0.0, doc="clip normalised observations to [-x, x]")
    clip_reward: float = field(10.0, min=0.0, doc="clip scaled rewards to [-x, x]")
    gamma: Optional[float] = field(None, min=0.0, max=1.0, doc="discount of the return whose std scales rewards; "
                                   "None: the algorithm's (ppo.gamma, vtrace.gamma)")
    epsilon: float = field(1e-8, min=0.0, doc="added to variances before the square root")

    @property
    def active(self) -> bool:
        """Whether anything is normalised (an `auto` not yet decided is not)."""
        return self.obs is True or self.reward is True

    @property
    def auto(self) -> bool:
        """Whether something is left to decide from the env when the run starts (`auto`, `vector`)."""
        return "auto" in (self.obs, self.reward) or self.obs == "vector"


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


# Keys an env.info_keys entry may not be: vector envs' own bookkeeping, and the names of the returns' and lengths'
# means (episode/return_mean, episode/length_mean), which an info key's mean would overwrite.
RESERVED_INFO_KEYS = ("final_info", "final_obs", "return", "length")


def check_info_keys(keys: tuple[str, ...]) -> None:
    """env.info_keys: distinct, non-empty names that are not vector-env bookkeeping nor the returns' metrics."""
    seen = set()
    for index, key in enumerate(keys):
        name = f"env.info_keys[{index}]"
        if not isinstance(key, str) or not key.strip() or key != key.strip():
            raise ConfigError(f"{name} = {key!r}: give the name of a key of the env's info, e.g. "
                              "env.info_keys=[is_success]")
        if key.startswith("_") or key in RESERVED_INFO_KEYS:
            raise ConfigError(f"{name} = {key!r} is not an episode fact an env reports: keys starting with '_' and "
                              f"{', '.join(RESERVED_INFO_KEYS)} are the vector env's bookkeeping or Menger's own "
                              "metrics (episode/return_mean, episode/length_mean); report it under another name")
        if key in seen:
            raise ConfigError(f"{name} = {key!r} is listed twice; list each key once")
        seen.add(key)


@dataclass(frozen=True)
class EnvConfig:
    id: str = field("CartPole-v1", doc="a gymnasium id (e.g. CartPole-v1, ALE/Pong-v5), "
                    "'package:Id' for an id that a package registers when imported (the package is imported first, "
                    "in every process), or 'package.module:ClassOrFactory'")
    kwargs: dict = field(default_factory=dict, doc="keyword arguments for the environment's constructor")
    preset: Optional[Literal["atari"]] = field(None, doc="'atari': ALE with frame skip 4, 84x84 grey, stack 4")
    nonfinite: Literal["drop", "fail"] = field("drop", doc="NaN/Inf from the env: drop the transition and count it, or fail")
    num_threads: int = field(1, min=1, doc="threads per actor for envs that step in C++ threads (ALE)")
    wrappers: tuple[Union[str, dict], ...] = field(
        (), doc="gymnasium wrappers applied to each env, in order: 'package.module:Wrapper', or {class: "
        "'package.module:Wrapper', <its kwargs>} (e.g. {class: 'gymnasium.wrappers:TimeLimit', "
        "max_episode_steps: 200})")
    info_keys: tuple[str, ...] = field(
        (), doc="keys of the env's info logged at each episode's end as means over the last stop.window episodes "
        "that reported them (is_success -> episode/is_success_mean); numbers and bools; single-agent envs; see "
        "docs/guides/episode-info.md")
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
        check_info_keys(self.info_keys)
        if self.wrappers and self.preset is not None:
            raise ConfigError(f"env.wrappers with env.preset={self.preset!r}: the preset is a vector env with its own "
                              "preprocessing, not single envs to wrap; unset one of them")


@dataclass(frozen=True)
class ModelConfig:
    encoder: Literal["auto", "mlp", "cnn", "cnn_shallow", "board"] = field(
        "auto", doc="auto: for an image ([C,H,W] or [H,W,C]) the Nature CNN, or MinAtar's one 3x3 layer where it "
        "is smaller than 36x36; else an MLP over every entry (Discrete ones one-hot, a Dict's images through that "
        "CNN first); mlp: an MLP over every entry flattened; cnn_shallow: IMPALA's shallow CNN (3x "
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
    squash_mean: bool = field(False, doc="ppo, impala, appo, a3c: the Gaussian's mean of Box actions is "
                              "tanh-squashed into the action bounds (where finite), so it cannot drift past a "
                              "bound the env clips at; the noise is added after it. A deterministic policy then "
                              "acts inside the bounds")
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
    interval_frames: Optional[int] = field(None, min=1, doc="env frames of training between evaluations, instead "
                                           "of interval_s: curves at the same frames on any machine (menger bench)")
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
    cache_fanout: int = field(
        0, min=0, doc="the parameter caches' fan-out: 0 = the learner tells every node's cache of each version, and a "
        "cache fetches a version when an actor first reads it; F >= 2 = a tree of cell caches between them, each "
        "telling at most F caches below, every version pushed down it (the learner sends each to at most F)")

    def __post_init__(self):
        if self.cache_fanout == 1:
            raise ConfigError("runtime.ray.cache_fanout=1 makes a chain, not a tree: give 0 (one cache per node, "
                              "told by the learner) or a fan-out of at least 2, e.g. 16")


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
        "of this machine and adjusted during the run (docs/guides/sizing.md)")
    batch_envs: int = field(
        0, min=0, doc="async, when batch_unrolls is 0: env columns per learner batch, whatever the fleet (a batch "
        "takes ceil(batch_envs / envs_per_actor) unrolls, at most the slots there are), so more actors do not make "
        "each update bigger; 0 = one unroll per actor")


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
    keep_last: int = field(3, min=1, doc="complete checkpoints kept (the newest; the best and the kept-every ones "
                           "come on top)")
    keep_best: bool = field(False, doc="also keep the checkpoint of the parameters whose deterministic evaluation "
                            "scored the highest eval/return_mean so far, never pruned (checkpoints/BEST.json names "
                            "it; --checkpoint best); needs a run that evaluates (eval.interval_s or "
                            "eval.interval_frames)")
    keep_every_frames: int = field(0, min=0, doc="also keep a checkpoint every this many env frames, never pruned "
                                   "(the first one saved at or past each multiple); 0 = none")


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
