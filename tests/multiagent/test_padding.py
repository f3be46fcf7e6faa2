"""Agents whose spaces differ, played by one policy: padded observations with a one-hot of the agent's kind,
the largest Discrete action set with each agent's own actions masked in, the widest Box action cut back."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from menger import api
from menger.envs.multiagent import multiagent_vec_env
from menger.envs.multiagent_pad import PaddedAgents, spaces_differ
from tests.multiagent.fakes import Duel, Mixed


def test_discrete_agents_get_padded_observations_a_kind_one_hot_and_masks_of_their_own_actions():
    game = PaddedAgents(Mixed())
    assert spaces_differ(Mixed()) and not spaces_differ(Duel())
    assert game.observation_space("small_0") == game.observation_space("big_0")
    assert game.observation_space("big_0").shape == (6,)  # 4 entries of the widest, then 2 kinds
    assert game.action_space("small_1") == spaces.Discrete(3)
    observations, infos = game.reset(seed=0)
    np.testing.assert_array_equal(observations["big_0"], [0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(observations["small_1"], [0, 2, 0, 0, 0, 1])
    np.testing.assert_array_equal(infos["big_0"]["action_mask"], [1, 1, 1])
    np.testing.assert_array_equal(infos["small_0"]["action_mask"], [1, 1, 0])
    observations, rewards, *_ = game.step({"big_0": 2, "small_0": 1, "small_1": 2})
    assert game.game.actions_seen[-1] == {"big_0": 2, "small_0": 1, "small_1": 1}  # past its own: its last
    np.testing.assert_array_equal(observations["big_0"], [1, 0, 1, 1, 1, 0])
    assert game.state()[0] == 1  # everything else is the game's own


def test_box_agents_act_with_the_leading_entries_of_the_widest_action_clipped_to_their_own_bounds():
    game = PaddedAgents(Mixed(boxes=True))
    assert game.action_space("small_0") == spaces.Box(-1, 1, (3,), np.float32)
    game.reset(seed=0)
    game.step({"big_0": np.array([0.5, -2.0, 0.1]), "small_0": np.array([0.3, 0.9, 0.5]),
               "small_1": np.array([3.0, 0.0, 0.0])})
    seen = game.game.actions_seen[-1]
    np.testing.assert_allclose(seen["big_0"], [0.5, -1.0, 0.1])
    np.testing.assert_allclose(seen["small_0"], [0.3, 0.9])
    np.testing.assert_allclose(seen["small_1"], [1.0, 0.0])


class DictObs(Mixed):
    def observation_space(self, agent):
        return spaces.Dict({"observation": super().observation_space(agent)})


class MixedActions(Mixed):
    def action_space(self, agent):
        return spaces.Discrete(2) if agent == "big_0" else spaces.Box(-1, 1, (1,), np.float32)


class Learn:
    swap_seats, agent_id, critic, random_opening = False, False, "local", 0

    def __init__(self, *learn: str):
        self.learn = learn


def test_what_cannot_be_padded_is_refused_naming_the_agents():
    with pytest.raises(ValueError, match="agent 'big_0' observes Dict.*env.multiagent.learn"):
        PaddedAgents(DictObs(), "fake:DictObs")
    with pytest.raises(ValueError, match="not all Discrete or all Box.*small_0: Box"):
        PaddedAgents(MixedActions(), "fake:MixedActions")


def test_a_game_that_cannot_be_padded_is_refused_only_where_the_learned_agents_differ():
    with pytest.raises(ValueError, match="agent 'big_0' observes Dict"):
        multiagent_vec_env(DictObs, 3, seed=0, env_id="fake:DictObs", config=Learn("*"))
    envs = multiagent_vec_env(DictObs, 2, seed=0, env_id="fake:DictObs", config=Learn("small_*"))
    assert not isinstance(envs.games[0], PaddedAgents)  # left as it was: its learned agents share their spaces
    envs.close()


def test_the_vec_env_pads_a_game_whose_agents_differ_and_opponents_see_the_same_rows():
    envs = multiagent_vec_env(Mixed, 4, seed=0, env_id="fake:Mixed", config=Learn("small_*"))
    assert isinstance(envs.games[1], PaddedAgents)
    assert envs.num_envs == 4 and envs.single_observation_space["observation"].shape == (6,)
    obs = envs.reset()
    np.testing.assert_array_equal(obs["action_mask"], [[1, 1, 0]] * 4)
    for _ in range(10):  # the big agent is a random opponent: its legal actions are all three
        envs.step(np.ones(4, np.int64))
    big = {seen["big_0"] for game in envs.games for seen in game.game.actions_seen}
    assert big <= {0, 1, 2} and len(big) > 1
    envs.close()


def test_the_generic_marl_preset_trains_every_agent_of_a_game_whose_agents_differ(tmp_path):
    run = api.train("marl", overrides=["env.id=tests.multiagent.fakes:Mixed", "runtime.launcher=threads",
                                       "runtime.unroll_length=8", "model.hidden=[16]", "log.tensorboard=false",
                                       "stop.env_frames=1200", "eval.interval_frames=600"],
                    run_dir=str(tmp_path / "run"))
    assert run.final_metrics["time/env_frames"] >= 1200 and run.final_metrics["eval/episodes"] == 12
