"""The learner's own gradient step (foreach Adam and global-norm clipping) against torch's reference versions."""
import pytest
import torch
from torch import nn

from menger.learners.learner import Adam, clip_gradients


def _twin_networks():
    torch.manual_seed(0)
    first = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    second = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    second.load_state_dict(first.state_dict())
    return first, second


def _backward(network, x):
    network.zero_grad(set_to_none=True)
    (network(x) ** 2).sum().backward()


def test_adam_follows_torch_adam_step_for_step():
    ours_net, torch_net = _twin_networks()
    ours = Adam(list(ours_net.parameters()), lr=3e-3, eps=1e-5)
    reference = torch.optim.Adam(torch_net.parameters(), lr=3e-3, eps=1e-5)
    generator = torch.Generator().manual_seed(1)
    for step in range(40):
        x = torch.randn(16, 4, generator=generator)
        if step == 20:  # the learning-rate schedule writes here
            ours.param_groups[0]["lr"] = reference.param_groups[0]["lr"] = 1e-3
        for network, optimizer in ((ours_net, ours), (torch_net, reference)):
            _backward(network, x)
            optimizer.step()
    for mine, theirs in zip(ours_net.parameters(), torch_net.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_adam_state_loads_from_and_into_torch_adam():
    ours_net, torch_net = _twin_networks()
    reference = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5)
    for _ in range(3):
        _backward(torch_net, torch.ones(2, 4))
        reference.step()
    ours = Adam(list(ours_net.parameters()), lr=5e-4, eps=1e-5)
    ours.load_state_dict(reference.state_dict())
    assert ours.steps == 3 and ours.param_groups[0]["lr"] == 1e-3
    first = next(iter(torch_net.parameters()))
    assert torch.equal(ours.exp_avg[0], reference.state[first]["exp_avg"])
    again = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5)
    again.load_state_dict(ours.state_dict())
    assert torch.equal(again.state[first]["exp_avg_sq"], reference.state[first]["exp_avg_sq"])


def test_adam_refuses_the_state_of_another_network():
    small, _ = _twin_networks()
    other = Adam([nn.Parameter(torch.zeros(3))], lr=1e-3, eps=1e-5)
    with pytest.raises(ValueError, match="this policy has 4"):
        Adam(list(small.parameters()), lr=1e-3, eps=1e-5).load_state_dict(other.state_dict())


def test_adam_leaves_a_parameter_without_gradient_alone():
    used, unused = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    optimizer = Adam([used, unused], lr=0.1, eps=1e-8)
    (used ** 2).sum().backward()
    optimizer.step()
    assert torch.equal(unused, torch.ones(2)) and torch.equal(optimizer.exp_avg[1], torch.zeros(2))
    assert (used < 1).all()


@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_clip_gradients_matches_clip_grad_norm(max_norm):
    ours_net, torch_net = _twin_networks()
    x = torch.randn(8, 4)
    _backward(ours_net, x)
    _backward(torch_net, x)
    norm = clip_gradients(list(ours_net.parameters()), max_norm)
    reference = nn.utils.clip_grad_norm_(torch_net.parameters(), max_norm)
    torch.testing.assert_close(norm, reference)
    for mine, theirs in zip(ours_net.parameters(), torch_net.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)


def test_a_max_norm_of_zero_means_no_clipping_not_zero_gradients():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    norm = clip_gradients([p], 0.0)
    assert torch.equal(p.grad, torch.full((3,), 2.0)) and float(norm) == pytest.approx(12 ** 0.5)
