"""The off-policy pieces on their own: Ape-X's epsilons, acting with a Q network and a squashed Gaussian, the
twin critics, and a DQN and a SAC learner step on a hand-made batch."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.algorithms.apex.spec import ApexConfig
from menger.algorithms.sac.spec import SACConfig
from menger.experiment import ModelConfig
from menger.learners import DQNLearner, SACLearner
from menger.models import build_policy
from menger.models.qnet import apex_epsilon
from menger.models.sac import TwinCritics


def test_each_ape_x_actor_explores_with_its_own_epsilon():
    eps = [apex_epsilon(i, 8) for i in range(8)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert apex_epsilon(0, 1) == pytest.approx(0.4)
    assert apex_epsilon(2, 5) == pytest.approx(0.4 ** (1 + 7 * 2 / 4))


def test_a_q_network_acts_greedily_or_at_random_over_the_legal_actions_only():
    space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (3,)), "action_mask": gym.spaces.MultiBinary(4)})
    q = build_policy(space, gym.spaces.Discrete(4), ModelConfig(hidden=(16,), activation="relu"), "apex")
    mask = torch.tensor([[0, 1, 0, 1]] * 500, dtype=torch.float32)
    obs = {"x": torch.randn(500, 3), "action_mask": mask}
    q.explore([0], 1, base=1.0, alpha=7)  # epsilon 1: every action at random
    out = q.act(obs, None, generator=torch.Generator().manual_seed(0))
    assert set(out.action.tolist()) == {1, 3}  # never an illegal one, both legal ones
    greedy = q.act(obs, None, deterministic=True)
    values = q(obs)
    assert torch.equal(greedy.action, values.argmax(-1)) and torch.allclose(greedy.value, values.max(-1).values)
    assert torch.allclose(out.logp, values.gather(-1, out.action[:, None]).squeeze(-1))  # Q of the action taken


def test_a_squashed_gaussian_acts_inside_the_box_and_its_mean_action_is_deterministic():
    box = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    actor = build_policy(gym.spaces.Box(-1, 1, (3,)), box, ModelConfig(hidden=(16,), activation="relu"), "sac")
    obs = torch.randn(256, 3) * 10
    out = actor.act(obs, None, generator=torch.Generator().manual_seed(1))
    assert (out.action >= torch.tensor(box.low)).all() and (out.action <= torch.tensor(box.high)).all()
    assert torch.equal(actor.act(obs, None, deterministic=True).action, actor.act(obs, None, deterministic=True).action)
    actor.random_steps = 1
    uniform = actor.act(obs, None, generator=torch.Generator().manual_seed(2))
    assert actor.random_steps == 0 and (uniform.action[:, 1] >= 0).all()


def test_the_twin_critics_are_two_independent_networks():
    critics = TwinCritics(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (1,)), hidden=(8, 8))
    q1, q2 = critics(torch.randn(5, 3), torch.rand(5, 1))
    assert q1.shape == q2.shape == (5,) and not torch.allclose(q1, q2)
    q1.sum().backward()
    assert all(w.grad[1].abs().sum() == 0 for w in critics.weights)  # Q1's loss moves no weight of Q2


def _batch(n, obs_dim, actions):
    g = torch.Generator().manual_seed(0)
    return {"obs": torch.randn(n, obs_dim, generator=g), "next_obs": torch.randn(n, obs_dim, generator=g),
            "actions": actions, "rewards": torch.randn(n, generator=g), "discounts": torch.full((n,), 0.99),
            "weights": torch.rand(n, generator=g)}


def test_a_dqn_step_returns_one_priority_per_item_and_copies_the_target_on_schedule():
    policy = build_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig(hidden=(16,)), "apex")
    learner = DQNLearner(policy, ApexConfig(target_update_interval=2), device=torch.device("cpu"), seed=0)
    batch = _batch(32, 4, torch.randint(0, 2, (32,)))
    before = {k: v.clone() for k, v in learner.target.state_dict().items()}
    stats = learner.update(batch, 0)
    assert stats["priorities"].shape == (32,) and (stats["priorities"] > 0).all()
    assert all(torch.equal(before[k], v) for k, v in learner.target.state_dict().items())  # not yet
    learner.update(batch, 0)
    assert all(torch.equal(learner.policy.state_dict()[k], v) for k, v in learner.target.state_dict().items())


def test_a_sac_step_moves_actor_critics_temperature_and_targets():
    box = gym.spaces.Box(-1, 1, (2,))
    actor = build_policy(gym.spaces.Box(-1, 1, (3,)), box, ModelConfig(hidden=(16,)), "sac")
    learner = SACLearner(actor, SACConfig(critic_hidden=(16,), tau=0.5), device=torch.device("cpu"), seed=0)
    snapshot = {name: [p.detach().clone() for p in part.parameters()]
                for name, part in (("actor", learner.policy), ("critics", learner.critics), ("target", learner.target))}
    alpha = float(learner.log_alpha.detach())
    stats = learner.update(_batch(64, 3, torch.rand(64, 2) * 2 - 1), 0)
    for name, part in (("actor", learner.policy), ("critics", learner.critics), ("target", learner.target)):
        assert any(not torch.equal(a, b) for a, b in zip(snapshot[name], part.parameters())), name
    assert float(learner.log_alpha.detach()) != alpha and np.isfinite(stats["loss"])
    state = learner.state_dict()
    twin = SACLearner(build_policy(gym.spaces.Box(-1, 1, (3,)), box, ModelConfig(hidden=(16,)), "sac"),
                      SACConfig(critic_hidden=(16,), tau=0.5), device=torch.device("cpu"), seed=5)
    twin.load_state_dict(state)
    batch = _batch(64, 3, torch.rand(64, 2) * 2 - 1)
    assert learner.update(batch, 0)["loss"] == twin.update(batch, 0)["loss"]  # the state is all of it


def test_each_env_of_an_actor_explores_with_its_own_copys_epsilon():
    q = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), ModelConfig(hidden=(16,)), "apex")
    q.explore([0, 1], 2, base=0.5, alpha=7)  # copy 0: 0.5, copy 1: 0.5^8
    assert torch.allclose(q.epsilon, torch.tensor([0.5, 0.5 ** 8]))
    obs = torch.randn(4000, 3)
    greedy = q.act(obs, None, deterministic=True).action
    out = q.act(obs, None, generator=torch.Generator().manual_seed(0)).action  # rows alternate copies 0, 1
    differs = (out != greedy).float()
    assert differs[0::2].mean() == pytest.approx(0.5 * 3 / 4, abs=0.05)   # random 1/2 of the time, 3/4 of it not greedy
    assert differs[1::2].mean() < 0.02


def test_ape_x_epsilons_fall_from_the_start_to_each_actors_own_over_the_runs_first_frames():
    from menger.algorithms.builders import explore_like_apex
    from menger.experiment import load_experiment

    config = load_experiment("apex", ["runtime.actors=2", "runtime.envs_per_actor=2", "apex.epsilon_decay_frames=1000",
                                      "apex.epsilon_start=1.0", "apex.epsilon_per=actor"])
    q = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), ModelConfig(hidden=(16,)), "apex")
    anneal = explore_like_apex(config, q, actor_id=1)["exploration"]
    settled = torch.tensor([apex_epsilon(1, 2)] * 2)
    anneal(0)
    assert torch.allclose(q.epsilon, torch.ones(2))  # every env at random at first
    anneal(250)  # this actor's 250 frames stand for the run's 500 (of two actors): half way
    assert torch.allclose(q.epsilon, (1.0 + settled) / 2)
    anneal(10_000)
    assert torch.allclose(q.epsilon, settled)  # Ape-X's own epsilon once the decay is over
    fixed = load_experiment("apex", ["apex.epsilon_decay_frames=0", "apex.epsilon_per=actor"])
    assert explore_like_apex(fixed, q, actor_id=0) == {"exploration": None}
    assert torch.allclose(q.epsilon, torch.tensor([apex_epsilon(0, 2)] * 8))  # fixed from the first step


def test_the_generic_apex_preset_gives_every_env_of_the_fleet_its_own_epsilon():
    """`apex` explores per env: 2 actors x 8 envs are Ape-X's N = 16, so actor 1's envs settle on epsilons 8-15."""
    from menger.algorithms.builders import explore_like_apex
    from menger.experiment import load_experiment

    config = load_experiment("apex")
    assert (config.runtime.actors, config.runtime.envs_per_actor, config.apex.epsilon_per) == (2, 8, "env")
    q = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), ModelConfig(hidden=(16,)), "apex")
    anneal = explore_like_apex(config, q, actor_id=1)["exploration"]
    anneal(0)
    assert torch.allclose(q.epsilon, torch.ones(8))
    anneal(config.apex.epsilon_decay_frames)  # an actor's frames are half the run's: past the decay
    settled = torch.tensor([apex_epsilon(8 + b, 16) for b in range(8)])
    assert torch.allclose(q.epsilon, settled) and settled[0] < 0.4 and settled[-1] == pytest.approx(0.4 ** 8)
