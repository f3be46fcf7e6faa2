"""R2D2's recurrent Q network: unrolling equals stepping, episode ends reset the state, the stored state
matters to the burn-in, and the burn-in carries no gradient."""
import gymnasium as gym
import torch

from menger.models.qnet import RecurrentQNetwork

OBS, ACTIONS, H = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3), 8


def _net(seed=0):
    torch.manual_seed(seed)
    return RecurrentQNetwork(OBS, ACTIONS, lstm_size=H, hidden=(16,))


def _sequence(steps=10, batch=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(steps, batch, 2, generator=g)
    dones = (torch.rand(steps, batch, generator=g) < 0.2).float()
    state = torch.randn(2, batch, H, generator=g) * 0.5
    return obs, dones, state


def test_unrolling_a_sequence_equals_stepping_it_with_resets_at_episode_ends():
    net, (obs, dones, state) = _net(), _sequence()
    q, final = net.unroll(obs, state, dones)
    s, stepped = state, []
    for t in range(obs.shape[0]):
        out = net.act(obs[t], s, deterministic=True)
        stepped.append(net.step(obs[t], s)[0])
        s = out.state * (1.0 - dones[t])[None, :, None]  # the actor zeroes the state after an episode ends
    torch.testing.assert_close(q, torch.stack(stepped))
    torch.testing.assert_close(final, s)


def test_the_stored_state_changes_what_the_burn_in_reaches():
    net, (obs, dones, state) = _net(), _sequence()
    dones = torch.zeros_like(dones)  # no episode end inside the burn-in: the stored state must carry through
    from_stored = net.burn_in(obs[:4], state, dones[:4])
    from_zeros = net.burn_in(obs[:4], torch.zeros_like(state), dones[:4])
    assert not torch.allclose(from_stored, from_zeros)
    q_stored, _ = net.unroll(obs[4:], from_stored, dones[4:])
    q_zeros, _ = net.unroll(obs[4:], from_zeros, dones[4:])
    assert not torch.allclose(q_stored, q_zeros)
    assert torch.equal(net.burn_in(obs[:0], state, dones[:0]), state)  # no burn-in: the stored state itself


def test_burn_in_steps_carry_no_gradient():
    net, (obs, dones, state) = _net(), _sequence()
    obs = obs.clone().requires_grad_(True)
    start = net.burn_in(obs[:4], state, dones[:4])
    assert not start.requires_grad
    q, _ = net.unroll(obs[4:], start, dones[4:])
    q.sum().backward()
    assert obs.grad is not None
    assert (obs.grad[:4] == 0).all()           # nothing flows back into the burned-in steps
    assert (obs.grad[4:].abs().sum() > 0)       # the trained steps get their gradient
    assert all(p.grad is not None for p in net.parameters())


def test_acting_explores_with_the_actors_epsilon_and_returns_the_next_state():
    net = _net()
    net.explore([0, 0], 1, base=1.0, alpha=7)  # epsilon 1: every action at random
    obs = torch.randn(2000, 2)
    out = net.act(obs, net.initial_state(2000), generator=torch.Generator().manual_seed(0))
    assert set(out.action.tolist()) == {0, 1, 2} and out.state.shape == (2, 2000, H)
    greedy = net.act(obs, None, deterministic=True)
    torch.testing.assert_close(greedy.value, net(obs).max(-1).values)
