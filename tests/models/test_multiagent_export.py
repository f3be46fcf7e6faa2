"""Multi-agent networks after training: `menger.api.load_policy` and `menger export` (TorchScript, ONNX) for independent
agents (`model.agents=2`) and for one shared recurrent network with a centralised critic, on an env whose Dict
observation carries `agent_id` and `critic_state`. The exported file takes one input per entry but the critic's
(no action reads it) and acts as `load_policy` does."""
import json
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch

from menger import api
from menger.commands.export import ExportError, _entries, export_policy
from menger.models.agents import AgentBank
from menger.models.encoders import CRITIC_KEY

ENV = "menger_test_agent_envs:AgentMatchEnv"
ALLOW = ["menger_test_agent_envs"]
SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.tensorboard=false", "log.progress=false",
         "stop.target_return=null", "eval.interval_s=0", f"env.id={ENV}", "stop.env_frames=1024"]
RUNS = {"independent": ["model.agents=2"], "shared-recurrent": ["model.lstm_size=16"]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    runs = {}

    def run_dir(name):
        if name not in runs:
            path = tmp_path_factory.mktemp(name) / "run"
            api.train("cartpole-ppo", overrides=[*SMALL, *RUNS[name]], run_dir=str(path))
            runs[name] = path
        return runs[name]
    return run_dir


def _env_observations(steps=6, envs=8):
    """[steps] batches of `envs` observations the env gave (agents drawn per env, targets per step)."""
    from menger_test_agent_envs import AgentMatchEnv

    games = [AgentMatchEnv() for _ in range(envs)]
    first = [game.reset(seed=i)[0] for i, game in enumerate(games)]
    batches = [first]
    for t in range(steps - 1):
        batches.append([game.step(t % 2)[0] for game in games])
    return [{key: np.stack([o[key] for o in batch]) for key in batch[0]} for batch in batches]


def test_load_policy_acts_with_each_rows_agent(trained):
    policy = api.load_policy(trained("independent"), ALLOW)
    assert isinstance(policy.network, AgentBank) and len(policy.network.agents) == 2
    obs = _env_observations(1)[0]
    actions = policy.act(obs)
    assert actions.shape == (8,) and actions.dtype == np.int64
    assert policy.act({key: value[3] for key, value in obs.items()}) == actions[3]  # one observation
    without_critic = {key: value for key, value in obs.items() if key != CRITIC_KEY}
    np.testing.assert_array_equal(policy.act(without_critic), actions)  # the actions never read it


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize("run", sorted(RUNS))
def test_an_exported_multiagent_policy_acts_as_load_policy_does(tmp_path, trained, run, fmt):
    policy = api.load_policy(trained(run), ALLOW)
    path = export_policy(trained(run), tmp_path / f"policy.{fmt}", fmt=fmt, allow_import=ALLOW)
    recurrent = run == "shared-recurrent"
    sequence = _env_observations()
    expected = [policy.act(obs) for obs in sequence]  # load_policy carries the recurrent state itself
    assert len(np.unique(np.concatenate(expected))) == 2  # both actions taken: a comparison that can fail
    keys = ["agent_id", "obs"]  # the Dict's entries in order, critic_state dropped
    state = np.zeros((2, 8, 16), np.float32)
    if fmt == "onnx":
        import onnxruntime as ort

        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == [f"obs.{k}" for k in keys] + (["state"] if recurrent else [])
        meta = json.loads(session.get_modelmeta().custom_metadata_map["menger.json"])
        for obs, want in zip(sequence, expected):
            feed = {f"obs.{k}": obs[k] for k in keys}
            if recurrent:
                action, state = session.run(None, dict(feed, state=state))
            else:
                (action,) = session.run(None, feed)
            np.testing.assert_array_equal(action, want)
    else:
        files = {"menger.json": ""}
        module = torch.jit.load(str(path), _extra_files=files)
        meta = json.loads(files["menger.json"])
        torch_state = torch.from_numpy(state)
        for obs, want in zip(sequence, expected):
            inputs = [torch.from_numpy(obs[k]) for k in keys]
            if recurrent:
                action, torch_state = module(*inputs, torch_state)
            else:
                action = module(*inputs)
            np.testing.assert_array_equal(action.numpy(), want)
    assert meta["obs_keys"] == keys and meta["obs_shape"] == {"agent_id": [2], "obs": [2]}
    assert meta["lstm_size"] == (16 if recurrent else 0)


def test_checkpoints_of_independent_agents_resume(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained("independent"), run)
    state = api.load_policy(run, ALLOW).network.state_dict()
    assert any(key.startswith("agents.1.") for key in state)
    result = api.resume(run, ["stop.env_frames=2048"], allow_import=ALLOW)
    assert result.final_metrics["time/env_frames"] >= 2048


def test_export_names_the_entries_it_cannot_take():
    space = gym.spaces.Dict({"obs": gym.spaces.Box(-1, 1, (2,)), "level": gym.spaces.Discrete(3),
                             CRITIC_KEY: gym.spaces.Box(-1, 1, (4,))})
    with pytest.raises(ExportError, match="a Dict of Box entries.*'level': Discrete\\(3\\)"):
        _entries(space)
    assert list(_entries(gym.spaces.Dict({"obs": gym.spaces.Box(-1, 1, (2,)),
                                          CRITIC_KEY: gym.spaces.Box(-1, 1, (4,))}))) == ["obs"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [["model.agents=2"], ["model.agents=0"], ["model.agents=0", "model.lstm_size=16"]])
def test_agents_that_must_act_differently_learn_to_in_every_mode(tmp_path, mode):
    """Agent 0 is paid for copying the target's sign, agent 1 for the opposite: a policy blind to the agent earns
    about 4 of 8 per episode, so more than 7 needs each row's agent read, from its own network or its agent_id."""
    overrides = [*SMALL, "stop.env_frames=16384", "ppo.lr=1e-3", "ppo.lr_schedule=constant", *mode]
    result = api.train("cartpole-ppo", overrides=overrides, run_dir=str(tmp_path / "run"))
    assert result.final_metrics["episode/return_mean"] > 7.0, result.final_metrics
