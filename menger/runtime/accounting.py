"""Every frame accounted for: produced, accepted, dropped (by reason), duplicates; recent episodes; env faults.

Env fault counters (`env_stats`: env_rebuilt, nonfinite_dropped, reset_failures, ...) arrive per incarnation,
cumulative within it; `env_totals` sums them over every incarnation of every actor, so a restart never resets
a count. Episodes that a fault ended are counted (`faulty_episodes`) and kept out of the returns. `infos` keeps,
per `env.info_keys` key, the values of the recent episodes that reported it (a key an episode did not report is
not a zero).
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field


@dataclass
class FrameAccounts:
    produced: int = 0
    accepted: int = 0
    dropped: Counter = field(default_factory=Counter)
    duplicates: int = 0
    episodes: int = 0
    faulty_episodes: int = 0
    invalid: int = 0  # rows that were no transition (autoreset steps and env faults)
    unrolls: int = 0
    returns: deque = field(default_factory=lambda: deque(maxlen=100))
    lengths: deque = field(default_factory=lambda: deque(maxlen=100))
    infos: dict = field(default_factory=dict)  # env.info_keys key -> deque of the recent episodes' values
    lags: list = field(default_factory=list)
    env_retired: Counter = field(default_factory=Counter)  # final counters of incarnations that are gone
    env_live: dict = field(default_factory=dict)           # actor id -> (incarnation, its latest counters)
    env_live_sum: Counter = field(default_factory=Counter)  # env_live's counters summed, kept as they change

    def drop(self, reason: str, frames: int) -> None:
        self.dropped[reason] += frames

    def record(self, meta, verdict) -> None:
        """One unroll tag and the coordinator's verdict on it (`menger.core.UnrollMeta`, `Verdict`)."""
        self.produced += meta.frames
        self.record_episodes(meta.episode_returns, meta.episode_lengths, meta.episode_infos)
        self.faulty_episodes += meta.faulty_episodes
        self.invalid += meta.invalid_frames
        self.unrolls += 1
        self._record_env_stats(meta.actor_id, meta.incarnation, dict(meta.env_stats))
        if verdict.reason == "duplicate":
            self.duplicates += 1
        if not verdict.accepted:
            self.drop(verdict.reason, meta.frames)

    def _record_env_stats(self, actor_id: int, incarnation: int, stats: dict) -> None:
        previous = self.env_live.get(actor_id)
        if previous is not None and incarnation < previous[0]:
            return  # a late word of an older incarnation: its successor's counters are newer
        if previous is not None and incarnation > previous[0]:
            self.env_retired.update(previous[1])
        for key, value in (previous[1] if previous is not None else {}).items():  # what the sum held of it
            self.env_live_sum[key] -= value
        for key, value in stats.items():
            self.env_live_sum[key] += value
        self.env_live[actor_id] = (incarnation, stats)

    def env_totals(self) -> dict[str, int]:
        """The env counters of every incarnation, gone or live: a sum kept as they change, so its cost is the
        counters', not the actors'."""
        totals = Counter(self.env_retired)
        for key, value in self.env_live_sum.items():
            totals[key] += value
        return dict(totals)

    @property
    def fault_frames(self) -> int:
        """Frames lost to env faults: invalid rows beyond the one autoreset row an ended episode may cost and the
        rows an env keeps idle by design (its `idle_rows` counter: AlphaZero's games sitting out their round)."""
        return max(0, self.invalid - self.episodes - self.env_totals().get("idle_rows", 0))

    def lose(self, frames: int) -> None:
        """The partial unroll of a lost incarnation: produced, and dropped as `actor_lost`."""
        self.produced += frames
        self.drop("actor_lost", frames)

    def record_episodes(self, returns, lengths, infos=()) -> None:
        """Episodes that ended; `infos`: for each, the (key, value) pairs of env.info_keys it reported."""
        self.episodes += len(returns)
        self.returns.extend(returns)
        self.lengths.extend(lengths)
        for pairs in infos:
            for key, value in pairs:
                self._info_values(key).append(value)

    def _info_values(self, key: str) -> deque:
        if key not in self.infos:
            self.infos[key] = deque(maxlen=self.returns.maxlen)
        return self.infos[key]

    def mean_return(self, window: int) -> float | None:
        if len(self.returns) < window:
            return None
        recent = list(self.returns)[-window:]
        return sum(recent) / window

    def state(self) -> dict:
        return {"produced": self.produced, "accepted": self.accepted, "dropped": dict(self.dropped),
                "duplicates": self.duplicates, "episodes": self.episodes, "returns": list(self.returns),
                "lengths": list(self.lengths), "faulty_episodes": self.faulty_episodes, "invalid": self.invalid,
                "infos": {key: list(values) for key, values in self.infos.items()},
                "unrolls": self.unrolls,
                "env_totals": self.env_totals()}

    @classmethod
    def from_state(cls, state: dict) -> "FrameAccounts":
        """Counters as saved; env counters of the saved run carry on as retired (the actors start afresh)."""
        accounts = cls(produced=int(state["produced"]), accepted=int(state["accepted"]),
                       dropped=Counter({k: int(v) for k, v in state["dropped"].items()}),
                       duplicates=int(state["duplicates"]), episodes=int(state["episodes"]),
                       faulty_episodes=int(state.get("faulty_episodes", 0)), invalid=int(state.get("invalid", 0)),
                       unrolls=int(state.get("unrolls", 0)),
                       env_retired=Counter({k: int(v) for k, v in state.get("env_totals", {}).items()}))
        accounts.returns.extend(float(x) for x in state["returns"])
        accounts.lengths.extend(int(x) for x in state["lengths"])
        for key, values in state.get("infos", {}).items():  # checkpoints of earlier versions have none
            accounts._info_values(str(key)).extend(float(x) for x in values)
        return accounts
