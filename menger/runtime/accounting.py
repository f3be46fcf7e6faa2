"""Every frame accounted for: produced, accepted, dropped (by reason), duplicates; and recent episodes."""
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
    returns: deque = field(default_factory=lambda: deque(maxlen=100))
    lengths: deque = field(default_factory=lambda: deque(maxlen=100))
    lags: list = field(default_factory=list)

    def drop(self, reason: str, frames: int) -> None:
        self.dropped[reason] += frames

    def record(self, meta, verdict) -> None:
        """One unroll tag and the coordinator's verdict on it (`menger.core.UnrollMeta`, `Verdict`)."""
        self.produced += meta.frames
        self.record_episodes(meta.episode_returns, meta.episode_lengths)
        if verdict.reason == "duplicate":
            self.duplicates += 1
        if not verdict.accepted:
            self.drop(verdict.reason, meta.frames)

    def lose(self, frames: int) -> None:
        """The partial unroll of a lost incarnation: produced, and dropped as `actor_lost`."""
        self.produced += frames
        self.drop("actor_lost", frames)

    def record_episodes(self, returns, lengths) -> None:
        self.episodes += len(returns)
        self.returns.extend(returns)
        self.lengths.extend(lengths)

    def mean_return(self, window: int) -> float | None:
        if len(self.returns) < window:
            return None
        recent = list(self.returns)[-window:]
        return sum(recent) / window

    def state(self) -> dict:
        return {"produced": self.produced, "accepted": self.accepted, "dropped": dict(self.dropped),
                "duplicates": self.duplicates, "episodes": self.episodes, "returns": list(self.returns),
                "lengths": list(self.lengths)}

    @classmethod
    def from_state(cls, state: dict) -> "FrameAccounts":
        accounts = cls(produced=int(state["produced"]), accepted=int(state["accepted"]),
                       dropped=Counter({k: int(v) for k, v in state["dropped"].items()}),
                       duplicates=int(state["duplicates"]), episodes=int(state["episodes"]))
        accounts.returns.extend(float(x) for x in state["returns"])
        accounts.lengths.extend(int(x) for x in state["lengths"])
        return accounts
