"""env.info_keys through the whole runtime: an env that succeeds every other episode shows
episode/is_success_mean = 0.5 in metrics.jsonl under threads and processes, and `on_episode_end` sees every
episode with its actor, env and info."""
import sys
from collections import Counter
from pathlib import Path

import pytest

from menger import api
from menger.config import ConfigError
from menger.core import UnrollMeta, Verdict
from menger.experiment import load_experiment
from menger.logging import read_jsonl
from menger.runtime import Observer
from menger.runtime.accounting import FrameAccounts
from menger.runtime.metrics import MetricsRecorder
from menger.runtime.observers import Episode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from menger_test_info_envs import LENGTH  # noqa: E402

ENV_ID = "menger_test_info_envs:AlternatingSuccessEnv"  # a user's own module (forked actors inherit the path)
ENVS_PER_ACTOR = 4


class EpisodeLog(Observer):
    def __init__(self):
        self.episodes: list[Episode] = []

    def on_episode_end(self, trainer, episode):
        self.episodes.append(episode)


@pytest.mark.parametrize("launcher", ["threads", "processes"])
def test_is_success_of_every_other_episode_is_logged_as_a_mean_of_one_half(tmp_path, quiet, launcher):
    log = EpisodeLog()
    run_dir = tmp_path / "run"
    api.train("cartpole-ppo", [*quiet, f"runtime.launcher={launcher}", "runtime.actors=2",
                               f"runtime.envs_per_actor={ENVS_PER_ACTOR}", "runtime.unroll_length=16",
                               "runtime.learner.threads=1", "runtime.learner.device=cpu", "ppo.epochs=1",
                               f"env.id={ENV_ID}", "env.info_keys=[is_success, bonus, never_reported]",
                               "stop.target_return=null", "stop.env_frames=1536", "checkpoint.interval_s=0",
                               "log.interval_s=0.05"],
              run_dir=str(run_dir), observers=[log])

    records = read_jsonl(run_dir / "metrics.jsonl")
    last = records[-1]
    print(f"{launcher}: {last['episode/count']} episodes, is_success_mean {last['episode/is_success_mean']}, "
          f"bonus_mean {last['episode/bonus_mean']}")
    with_means = [r for r in records if "episode/is_success_mean" in r]
    assert with_means and all(r["episode/is_success_mean"] == 0.5 for r in with_means)
    assert last["episode/bonus_mean"] == 1.0  # reported by successes only: a missing key is no zero
    assert not any("episode/never_reported_mean" in r for r in records)
    assert last["episode/return_mean"] == LENGTH

    # the hook: every episode the metrics counted, with where it ran and what it reported
    assert len(log.episodes) == last["episode/count"]
    every_env = {(actor, env) for actor in range(2) for env in range(ENVS_PER_ACTOR)}
    assert {(e.actor_id, e.env_index) for e in log.episodes} == every_env
    assert all(e.episode_return == LENGTH and e.length == LENGTH for e in log.episodes)
    successes = Counter(e.info["is_success"] for e in log.episodes)
    assert successes[1.0] == successes[0.0] == len(log.episodes) / 2
    assert all(e.info.get("bonus") == 1.0 for e in log.episodes if e.info["is_success"])
    assert all("bonus" not in e.info for e in log.episodes if not e.info["is_success"])
    for (actor, env), runs in _by_env(log.episodes).items():  # each env alternates, episode after episode
        outcomes = [e.info["is_success"] for e in runs]
        assert all(a != b for a, b in zip(outcomes, outcomes[1:])), (actor, env, outcomes)


def _by_env(episodes):
    out: dict = {}
    for episode in episodes:
        out.setdefault((episode.actor_id, episode.env_index), []).append(episode)
    return out


def _tag(returns, infos, envs=()):
    return UnrollMeta(0, 0, 1, 0, 16, episode_returns=tuple(returns), episode_lengths=(5,) * len(returns),
                      episode_envs=tuple(envs), episode_infos=tuple(tuple(info.items()) for info in infos))


def test_the_means_skip_episodes_that_did_not_report_a_key_and_survive_a_checkpoint():
    accounts = FrameAccounts()
    accepted = Verdict(True, delivered=True)
    accounts.record(_tag([1.0, 2.0, 3.0], [{"is_success": 1.0}, {}, {"is_success": 0.0, "steps": 7.0}]),
                    accepted)
    restored = FrameAccounts.from_state(accounts.state())
    for state in (accounts, restored):
        metrics = MetricsRecorder(window=20).record(1.0, state, 1, 1, learner_stats={}, env_stats={}, components={})
        assert metrics["episode/is_success_mean"] == 0.5 and metrics["episode/steps_mean"] == 7.0
    window = MetricsRecorder(window=2)  # the last `window` episodes that reported the key
    restored.record(_tag([4.0], [{"is_success": 1.0}]), accepted)
    assert window.record(1.0, restored, 1, 1, learner_stats={}, env_stats={}, components={})[
        "episode/is_success_mean"] == 0.5


def test_an_unroll_without_info_keys_makes_episodes_with_an_empty_info():
    from menger.runtime.observers import episodes_of

    episodes = episodes_of(_tag([1.0, 2.0], [], envs=(3, 0)))
    assert [(e.env_index, e.episode_return, e.info) for e in episodes] == [(3, 1.0, {}), (0, 2.0, {})]


@pytest.mark.parametrize(("keys", "words"), [
    ("[return]", ["env.info_keys[0] = 'return'", "episode/return_mean"]),
    ("[is_success, is_success]", ["env.info_keys[1] = 'is_success'", "listed twice"]),
    ("[_is_success]", ["'_is_success'", "starting with '_'"]),
    ("['']", ["env.info_keys[0] = ''", "env.info_keys=[is_success]"]),
])
def test_bad_info_keys_are_refused_naming_the_entry(keys, words):
    with pytest.raises(ConfigError) as raised:
        load_experiment("cartpole-ppo", [f"env.info_keys={keys}"])
    for word in words:
        assert word in str(raised.value)


def test_info_keys_with_a_multi_agent_env_are_refused_before_the_run(tmp_path, quiet):
    pytest.importorskip("pettingzoo")
    with pytest.raises(ConfigError, match=r"env.info_keys=\['is_success'\].*multi-agent.*unset env.info_keys"):
        api.train("connect4-selfplay", [*quiet, "env.info_keys=[is_success]", "stop.env_frames=1000"],
                  run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
