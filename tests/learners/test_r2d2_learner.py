"""R2D2 from actor to learner: the state an actor stores at each sequence start is the one it acted with (the
learner's unroll from it reproduces the actor's Q values step for step, across episode ends, on NEXT_STEP and
SAME_STEP autoreset envs), the learner uses the stored state, and burned-in steps pass no gradient."""
import copy

import numpy as np
import pytest
import torch

from menger.actors.actor import Actor
from menger.envs import make_vec_env
from menger.algorithms.r2d2.spec import R2D2Config
from menger.learners import R2D2Learner
from menger.models.qnet import RecurrentQNetwork
from menger.transport import UnrollBuffers, UnrollSpec

T, B, H, PERIOD, W = 24, 3, 8, 4, 8


class FakePort:
    """One local slot and parameters that never change."""

    class Params:
        def version(self):
            return 0

        def read_into(self, policy):
            return 0

    def __init__(self, spec):
        self.buffers = UnrollBuffers(spec, 1, shared=False)
        self.params = self.Params()

    def slot(self, index):
        return self.buffers.slot(index)

    def num_slots(self):
        return 1

    def beat(self, actor_id, frames):
        pass


def _unroll(env_id, kwargs=None, seed=0):
    envs = make_vec_env(env_id, B, seed=seed, kwargs=kwargs or {}, next_step_autoreset=True)
    torch.manual_seed(seed)
    net = RecurrentQNetwork(envs.single_observation_space, envs.single_action_space, lstm_size=H, hidden=(16,))
    net.explore([0] * B, 1, base=0.5, alpha=0.0)  # explore, so that episodes end inside the unroll
    spec = UnrollSpec(envs.single_observation_space, envs.single_action_space, T, B, H, values=True, terminated=True,
                      sequence_starts=len(range(0, T - W + 1, PERIOD)))
    port = FakePort(spec)
    actor = Actor(0, 0, envs, net, port, unroll_length=T, seed=seed, sequence_period=PERIOD)
    actor.unroll(0)
    actor.unroll(0)  # the second one starts from a state carried over from the first
    envs.close()
    return net, port.buffers.tensors


@pytest.mark.parametrize("env_id,kwargs", [("menger/CartPoleNoVel-v0", None),   # NEXT_STEP autoreset
                                           ("menger/Memory-v0", {"length": 5})])  # SAME_STEP autoreset
def test_the_learners_unroll_from_a_stored_state_replays_the_actors_values(env_id, kwargs):
    net, t = _unroll(env_id, kwargs)
    assert t["restarts"][0].sum() > 0  # episodes ended inside the unroll
    assert t["core_states"][0, 0].abs().sum() > 0  # the unroll began mid-episode, with a state
    for k, start in enumerate(range(0, T - W + 1, PERIOD)):
        obs = t["obs"][0, start:start + W]
        restarts = t["restarts"][0, start:start + W]
        with torch.no_grad():
            q, _ = net.unroll(obs, t["core_states"][0, k], restarts)
        taken = q.gather(-1, t["actions"][0, start:start + W].unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(taken, t["logp"][0, start:start + W])  # logp holds the actor's Q(s, a)
        torch.testing.assert_close(q.max(-1).values, t["values"][0, start:start + W])


def _batch(seed=0, n=4, burn_in=3):
    g = torch.Generator().manual_seed(seed)
    valid = torch.ones(W, n)
    return {"obs": torch.randn(W + 1, n, 2, generator=g), "actions": torch.randint(0, 3, (W, n), generator=g),
            "rewards": torch.randn(W, n, generator=g), "discounts": torch.full((W, n), 0.99), "valid": valid,
            "restarts": torch.zeros(W, n), "state": torch.randn(2, n, H, generator=g),
            "burn_in": torch.tensor([0] + [burn_in] * (n - 1)), "weights": torch.ones(n)}


def _learner():
    import gymnasium as gym

    torch.manual_seed(0)
    net = RecurrentQNetwork(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3), lstm_size=H, hidden=(16,))
    return R2D2Learner(net, R2D2Config(sequence_length=W, period=PERIOD, burn_in=3, n_step=3),
                       device=torch.device("cpu"), seed=0)


def test_zeroing_the_stored_state_changes_the_loss_and_the_priorities():
    learner, batch = _learner(), _batch()
    loss, priorities, _ = learner.loss(batch)
    zeroed, zero_priorities, _ = learner.loss({**batch, "state": torch.zeros_like(batch["state"])})
    assert abs(float(loss.detach()) - float(zeroed.detach())) > 1e-4
    assert not np.allclose(priorities.numpy(), zero_priorities.numpy())


def test_burned_in_steps_pass_no_gradient_and_a_first_sequence_learns_from_every_step():
    learner, batch = _learner(), _batch()
    obs = batch["obs"].clone().requires_grad_(True)
    loss, _, _ = learner.loss({**batch, "obs": obs})
    loss.backward()
    grad = obs.grad.abs().sum(-1)  # [W+1, N]
    assert torch.all(grad[:3, 1:] == 0)       # rows 1..: their 3 burn-in steps carry nothing
    assert torch.all(grad[3:W, 1:] > 0)       # the steps after the burn-in learn
    assert torch.all(grad[:W, 0] > 0)         # row 0 starts an unroll: no burn-in
    state = batch["state"].clone().requires_grad_(True)
    learner.loss({**batch, "state": state})[0].backward()
    assert state.grad is None or torch.all(state.grad == 0)  # the stored state is data, never a target of the step


def test_an_update_moves_the_online_network_and_copies_it_into_the_target_on_schedule():
    learner, batch = _learner(), _batch()
    before = copy.deepcopy(learner.policy.state_dict())
    stats = learner.update(batch, 0)
    assert stats["priorities"].shape == (4,) and np.isfinite(stats["loss"])
    assert any(not torch.equal(before[k], v) for k, v in learner.policy.state_dict().items())
    assert all(torch.equal(before[k], v) for k, v in learner.target.state_dict().items())
