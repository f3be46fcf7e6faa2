"""`env.normalize`: running observation and reward normalisation, merged across every actor, in checkpoints,
and applied by load_policy, `menger eval` and `menger export`."""
import json

import numpy as np
import pytest
import torch

from menger import api
from menger.checkpoint import CheckpointManager, unflatten_state
from menger.config import ConfigError
from menger.experiment import ModelConfig, NormalizeConfig, load_experiment
from menger.commands.evaluate import evaluate_run
from menger.commands.export import export_policy
from menger.models import build_policy
from menger.models.normalize import Moments, RunningNormalization, UnrollMoments
from menger.runtime import Observer

T, B = 16, 4


def _settings(quiet, launcher="threads", actors=1):
    return [*quiet, f"runtime.launcher={launcher}", f"runtime.actors={actors}", f"runtime.envs_per_actor={B}",
            f"runtime.unroll_length={T}", "runtime.learner.device=cpu", "runtime.learner.threads=1", "ppo.epochs=2",
            "ppo.minibatches=2", "stop.target_return=null", "checkpoint.interval_s=0", "env.normalize.obs=true",
            "env.normalize.reward=true"]


def _checkpoint(run_dir):
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    return unflatten_state(checkpoint.tensors, checkpoint.metadata)


# ----- the maths ----------------------------------------------------------------------------------------------
def test_merged_moments_are_the_moments_of_the_concatenated_data():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(loc, scale, (n, 3)) for loc, scale, n in [(5.0, 2.0, 7), (-1e3, 0.1, 1), (0.0, 30.0, 250),
                                                                  (2.0, 1.0, 0), (1e4, 5.0, 40)]]
    merged = Moments.empty((3,))
    for chunk in chunks:
        merged = merged.merge(Moments.of(chunk))
    everything = np.concatenate(chunks)
    assert merged.count == len(everything)
    np.testing.assert_allclose(merged.mean, everything.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(merged.var, everything.var(axis=0), rtol=1e-12)
    # pairwise in another order: the same moments
    tree = Moments.of(chunks[0]).merge(Moments.of(chunks[1])).merge(
        Moments.of(chunks[2]).merge(Moments.of(chunks[4])))
    np.testing.assert_allclose(tree.var, merged.var, rtol=1e-12)
    assert Moments.empty((3,)).var.tolist() == [1.0, 1.0, 1.0]  # nothing seen yet: the identity


def test_integer_data_merges_exactly():
    data = np.arange(12, dtype=np.float64).reshape(12, 1) ** 2
    merged = Moments.of(data[:4]).merge(Moments.of(data[4:10])).merge(Moments.of(data[10:]))
    assert merged.count == 12 and merged.mean[0] == data.mean() and merged.m2[0] == ((data - data.mean()) ** 2).sum()


def test_an_actors_return_moments_follow_the_discounted_return_and_reset_at_episode_ends():
    moments = UnrollMoments(NormalizeConfig(reward=True), gamma=0.5, num_envs=2)
    rewards = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    ended = np.array([[0, 0], [1, 0], [0, 0]], bool)
    valid = np.array([[1, 1], [1, 1], [1, 0]], bool)  # env 1's last row is no transition
    _, ret = moments.of_unroll(None, rewards, ended, valid)
    seen = np.array([1.0, 2.0, 1.5, 3.0, 1.0])  # env 0: 1, 1.5, then a new episode: 1; env 1: 2, 3
    assert ret.count == 5 and ret.mean == pytest.approx(seen.mean()) and ret.var == pytest.approx(seen.var())
    assert moments.returns.tolist() == [1.0, 0.0]


def test_scaled_rewards_are_divided_by_the_return_std_and_clipped():
    norm = RunningNormalization(NormalizeConfig(reward=True, clip_reward=1.0, epsilon=0.0), (2,))
    norm.ret = Moments.of(np.array([0.0, 4.0]))  # std 2
    scaled = norm.scale_rewards(torch.tensor([1.0, -1.0, 10.0]))
    assert scaled.tolist() == [0.5, -0.5, 1.0]


def test_uint8_images_and_replay_algorithms_are_refused_with_the_reason(tmp_path, quiet):
    with pytest.raises(ConfigError, match="uint8 image observations"):
        api.train("cartpole-ppo", [*quiet, "env.id=menger/Catch-v0", "env.normalize.obs=true"],
                  run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="env.normalize with algo='sac'"):
        load_experiment("pendulum-sac", ["env.normalize.obs=true"])
    with pytest.raises(ConfigError, match="runtime.learner.count=1"):
        load_experiment("pendulum-ppo", ["env.normalize.reward=true", "runtime.learner.count=2"])


# ----- the run ------------------------------------------------------------------------------------------------
def test_every_actor_process_contributes_and_the_policy_carries_the_statistics(tmp_path, quiet):
    updates, actors = 3, 2
    run = api.train("pendulum-ppo", [*_settings(quiet, "processes", actors),
                                     f"stop.env_frames={updates * actors * T * B}"], run_dir=str(tmp_path / "run"))
    state = _checkpoint(run.run_dir)
    stats = state["normalization"]
    assert stats["obs"]["count"] == stats["ret"]["count"] == updates * actors * T * B == state["accounts"]["accepted"]
    assert run.final_metrics["normalize/obs_count"] == updates * actors * T * B
    # what the actors acted with: the statistics up to the last update, in the published parameters
    model = state["learner"]["model"]
    var = stats["obs"]["m2"] / stats["obs"]["count"]
    np.testing.assert_allclose(model["obs_normalizer.mean"].numpy(), stats["obs"]["mean"], rtol=1e-6)
    np.testing.assert_allclose(model["obs_normalizer.inv_std"].numpy(), 1 / np.sqrt(var + 1e-8), rtol=1e-6)


class _Batches(Observer):
    def __init__(self):
        self.metas = []

    def on_batch(self, trainer, batch):
        self.metas += batch.metas


def test_async_impala_counts_every_valid_row_of_every_batched_unroll(tmp_path, quiet):
    batches = _Batches()
    run = api.train("cartpole-impala", [*_settings(quiet, "threads", 2), "stop.env_frames=4096"],
                    run_dir=str(tmp_path / "run"), observers=[batches])
    state = _checkpoint(run.run_dir)
    # CartPole's own vector env resets on the step after an episode ends: those rows are no transition
    valid_rows = sum(meta.frames - meta.invalid_frames for meta in batches.metas)
    assert {meta.actor_id for meta in batches.metas} == {0, 1}
    assert state["normalization"]["obs"]["count"] == state["normalization"]["ret"]["count"] == valid_rows
    assert sum(meta.frames for meta in batches.metas) == state["accounts"]["accepted"] >= 4096


def test_statistics_and_parameters_are_the_same_after_a_resume(tmp_path, quiet):
    frames = 4 * T * B
    straight, split = tmp_path / "straight", tmp_path / "split"
    api.train("pendulum-ppo", [*_settings(quiet), f"stop.env_frames={2 * frames}"], run_dir=str(straight))
    api.train("pendulum-ppo", [*_settings(quiet), f"stop.env_frames={frames}"], run_dir=str(split))
    halfway = _checkpoint(split)["normalization"]
    assert halfway["obs"]["count"] == frames
    api.resume(split, overrides=[f"stop.env_frames={2 * frames}"])
    a, b = _checkpoint(straight), _checkpoint(split)
    for part in ("obs", "ret"):
        assert a["normalization"][part]["count"] == b["normalization"][part]["count"] == 2 * frames
        assert np.array_equal(a["normalization"][part]["mean"], b["normalization"][part]["mean"])
        assert np.array_equal(a["normalization"][part]["m2"], b["normalization"][part]["m2"])
    for name, tensor in a["learner"]["model"].items():
        assert torch.equal(tensor, b["learner"]["model"][name]), name


def test_reported_returns_are_raw_with_reward_normalisation(tmp_path, quiet):
    # one round of 200 steps: both runs act with the same initial policy, so their episodes are the same
    runs = {}
    for reward in ("false", "true"):
        runs[reward] = api.train("pendulum-ppo", [
            *_settings(quiet)[:-2], "runtime.unroll_length=200", f"env.normalize.reward={reward}",
            "stop.env_frames=800"], run_dir=str(tmp_path / reward)).final_metrics
    assert runs["true"]["episode/count"] == runs["false"]["episode/count"] == B
    assert runs["true"]["episode/return_mean"] == runs["false"]["episode/return_mean"]


def test_load_policy_and_export_normalise_raw_observations_as_trained(tmp_path, quiet):
    run = api.train("pendulum-ppo", [*_settings(quiet), f"stop.env_frames={3 * T * B}"], run_dir=str(tmp_path / "run"))
    stats = _checkpoint(run.run_dir)["normalization"]["obs"]
    mean, std = stats["mean"], np.sqrt(stats["m2"] / stats["count"] + 1e-8)
    policy = api.load_policy(run.run_dir)
    raw = np.random.default_rng(0).uniform(-8, 8, (9, 3)).astype(np.float32)
    # the same network without its normalising layer, on observations normalised by hand
    plain = build_policy(policy.network.obs_space, policy.network.action_space, policy.config.model)
    weights = {k: v for k, v in policy.network.state_dict().items() if not k.startswith("obs_normalizer.")}
    plain.load_state_dict(weights)
    by_hand = torch.from_numpy(np.clip((raw - mean) / std, -10, 10).astype(np.float32))
    expected = np.clip(plain.act(by_hand, deterministic=True).action.numpy(), -2, 2)
    np.testing.assert_allclose(policy.act(raw), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(policy.act(raw), np.clip(plain.act(torch.from_numpy(raw), deterministic=True)
                                                    .action.numpy(), -2, 2), atol=1e-3)  # it does normalise
    extra_files = {"menger.json": ""}
    exported = torch.jit.load(str(export_policy(run.run_dir)), _extra_files=extra_files)
    np.testing.assert_allclose(exported(torch.from_numpy(raw)).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert json.loads(extra_files["menger.json"])["normalizes_obs"] is True


def test_a_policy_without_normalisation_has_no_extra_parameters():
    space = __import__("gymnasium").spaces.Box(-1, 1, (3,))
    plain = build_policy(space, space, ModelConfig())
    normed = build_policy(space, space, ModelConfig(), normalize=NormalizeConfig(obs=True))
    assert sum(p.numel() for p in normed.parameters()) == sum(p.numel() for p in plain.parameters()) + 6
    assert not any(name.startswith("obs_normalizer") for name, _ in plain.named_parameters())


def test_a_resume_cannot_switch_observation_normalisation_on(tmp_path, quiet):
    run = api.train("pendulum-ppo", [*_settings(quiet)[:-2], f"stop.env_frames={T * B}"], run_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="env.normalize.obs=True but the run was trained without it"):
        api.resume(run.run_dir, overrides=["env.normalize.obs=true", f"stop.env_frames={2 * T * B}"])
    assert "obs: false" in (run.run_dir / "config.yaml").read_text()  # the run directory still says what it is
    api.resume(run.run_dir, overrides=[f"stop.env_frames={2 * T * B}"])  # and resumes as it was


@pytest.mark.slow
def test_pendulum_ppo_normalized_reaches_minus_250_and_eval_acts_as_trained(tmp_path, quiet):
    run = api.train("pendulum-ppo-normalized", [*quiet, "runtime.launcher=processes", "runtime.seed=1",
                                                "checkpoint.interval_s=0", "stop.target_return=-250"],
                    run_dir=str(tmp_path / "run"))
    assert run.reached_target, run.final_metrics
    report = evaluate_run(run.run_dir, episodes=5)  # on raw observations: the policy normalises them itself
    assert report["return_mean"] >= -400, report


@pytest.mark.parametrize("preset, env, algo_normalises, expected", [
    ("ppo", "Pendulum-v1", True, (True, True)),                  # continuous control: both on
    ("ppo", "CartPole-v1", True, (False, True)),                 # Discrete actions: rewards only
    ("impala", "Acrobot-v1", True, (False, True)),
    ("impala", "MountainCarContinuous-v0", True, (True, True)),
    ("a3c", "Pendulum-v1", True, (True, True)),                  # a parameter server: the version carries them
    ("a3c", "Acrobot-v1", True, (False, True)),
    ("sac", "Pendulum-v1", False, (False, False)),               # an algorithm that does not normalise: off
])
def test_auto_normalisation_is_decided_from_the_env_and_the_algorithm_when_the_run_starts(preset, env,
                                                                                          algo_normalises, expected):
    from menger.runtime.spaces import fit_to_env

    config = load_experiment(preset, [f"env.id={env}", "env.normalize.obs=auto", "env.normalize.reward=auto"])
    assert not config.env.normalize.active and config.algorithm.normalize == algo_normalises  # nothing yet
    decided = fit_to_env(config).env.normalize
    assert (decided.obs, decided.reward) == expected


@pytest.mark.parametrize("preset, env, expected", [
    ("ppo", "CartPole-v1", (True, True)),                        # Discrete actions, a float vector: both on
    ("ppo", "Pendulum-v1", (True, True)),                        # continuous control, as auto
    ("ppo", "menger/Catch-v0", (False, True)),                   # uint8 images: the CNN scales them
    ("ppo", "menger/Memory-v0", (True, True)),
    ("sac", "Pendulum-v1", (False, False)),                      # an algorithm that does not normalise: off
])
def test_vector_normalises_observations_that_are_float_vectors_whatever_the_actions(preset, env, expected):
    from menger.runtime.spaces import fit_to_env

    config = load_experiment(preset, [f"env.id={env}", "env.normalize.obs=vector", "env.normalize.reward=auto"])
    assert not config.env.normalize.active and config.env.normalize.auto  # nothing decided yet
    decided = fit_to_env(config).env.normalize
    assert (decided.obs, decided.reward) == expected


def test_auto_leaves_image_observations_alone_and_a_run_saves_what_was_decided(tmp_path, quiet):
    from menger.api import load_run_config
    from menger.runtime.spaces import fit_to_env

    images = load_experiment("ppo", ["env.id=menger/Catch-v0", "env.normalize.obs=auto"])
    assert fit_to_env(images).env.normalize.obs is False  # uint8 frames: the CNN scales them
    api.train("ppo", overrides=[*quiet, "env.id=Pendulum-v1", "env.normalize.obs=auto", "env.normalize.reward=auto",
                                "runtime.launcher=threads", "stop.env_frames=2048"],
              run_dir=str(tmp_path / "run"))
    saved = load_run_config(tmp_path / "run").env.normalize
    assert saved.obs is True and saved.reward is True  # eval, export and resume read the decision
