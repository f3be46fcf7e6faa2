"""The network side of the multi-agent training modes: a centralised critic (`critic_state`, seen by the value
function alone), independent parameters (`model.agents=K`, `AgentBank`) and shared parameters (one network, the
`agent_id` an input), through every entry point actors, learners, central inference and export use."""
import numpy as np
import pytest
import torch
from gymnasium import spaces

from menger.config import ConfigError
from menger.experiment import ModelConfig, load_experiment
from menger.inference import batched_act
from menger.models import build_policy
from menger.models.agents import AgentBank, agent_one_hot
from menger.models.encoders import AGENT_KEY, CRITIC_KEY, MASK_KEY, MLPEncoder
from menger.models.policy import Policy

K = 3
ACTIONS = {"discrete": spaces.Discrete(4), "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
           "tuple": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (1,), np.float32)))}


def _space(agents=K, critic=True, mask=0):
    entries = {"obs": spaces.Box(-1.0, 1.0, (5,), np.float32),
               AGENT_KEY: spaces.Box(0.0, 1.0, (agents,), np.float32)}
    if critic:
        entries[CRITIC_KEY] = spaces.Box(-1.0, 1.0, (7,), np.float32)
    if mask:
        entries[MASK_KEY] = spaces.Box(0.0, 1.0, (mask,), np.float32)
    return spaces.Dict(entries)


def _obs(n, agents_of_rows, seed=0, critic=True, mask=0):
    g = torch.Generator().manual_seed(seed)
    obs = {"obs": torch.randn(n, 5, generator=g),
           AGENT_KEY: torch.from_numpy(agent_one_hot(agents_of_rows, K))}
    if critic:
        obs[CRITIC_KEY] = torch.randn(n, 7, generator=g)
    if mask:
        obs[MASK_KEY] = (torch.rand(n, mask, generator=g) < 0.7).float()
        obs[MASK_KEY][:, 0] = 1.0
    return obs


def _unroll(t1, batch, agents_of_rows, seed=0, critic=True):
    """[T+1, B] observations; agents_of_rows [T+1, B] (a column may change agents between steps)."""
    flat = _obs(t1 * batch, np.asarray(agents_of_rows).reshape(-1), seed, critic)
    return {k: v.view(t1, batch, *v.shape[1:]) for k, v in flat.items()}


def _actions(network, obs, seed=1):
    return network.act(obs, network.initial_state(_rows(obs)), generator=torch.Generator().manual_seed(seed)).action


def _rows(obs):
    return next(iter(obs.values())).shape[0]


# ----- centralised critic -------------------------------------------------------------------------------------


@pytest.mark.parametrize("lstm_size", [0, 8])
@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_the_policy_never_reads_the_critic_state_and_the_value_does(kind, lstm_size):
    torch.manual_seed(0)
    network = Policy(_space(), ACTIONS[kind], lstm_size=lstm_size)
    obs = _obs(6, [0, 1, 2, 0, 1, 2])
    other = dict(obs, **{CRITIC_KEY: obs[CRITIC_KEY] + torch.randn(6, 7)})
    state = network.initial_state(6) + (0.3 if lstm_size else 0.0)
    out, value, _ = network(obs, state)
    out2, value2, _ = network(other, state)
    torch.testing.assert_close(out, out2, rtol=0, atol=0)
    torch.testing.assert_close(network.action_params(obs, state)[0], out, rtol=0, atol=0)
    assert (value - value2).abs().min() > 1e-6
    t1, batch = 4, 3
    seq = _unroll(t1, batch, np.zeros((t1, batch), int))
    seq2 = dict(seq, **{CRITIC_KEY: torch.randn(t1, batch, 7)})
    actions = torch.stack([_actions(network, {k: v[t] for k, v in seq.items()}) for t in range(t1 - 1)])
    dones = torch.zeros(t1 - 1, batch)
    dones[1, 0] = 1.0
    ev, ev2 = (network.evaluate(s, actions, network.initial_state(batch), dones) for s in (seq, seq2))
    torch.testing.assert_close(ev.logp, ev2.logp, rtol=0, atol=0)
    assert (ev.values - ev2.values).abs().min() > 1e-6


@pytest.mark.parametrize("lstm_size", [0, 8])
def test_the_policy_loss_gives_no_critic_parameter_a_gradient_and_the_value_loss_reads_the_critic_state(lstm_size):
    torch.manual_seed(0)
    network = Policy(_space(), ACTIONS["box"], lstm_size=lstm_size)
    seq = _unroll(5, 4, np.zeros((5, 4), int))
    actions = torch.stack([_actions(network, {k: v[t] for k, v in seq.items()}) for t in range(4)])
    ev = network.evaluate(seq, actions, network.initial_state(4), torch.zeros(4, 4))
    ev.logp.sum().backward(retain_graph=True)
    critic = {id(p) for p in [*network.value_encoder.parameters(), *network.v.parameters()]}
    for name, param in network.named_parameters():
        if id(param) in critic:
            assert param.grad is None, name
    assert network.pi.weight.grad.abs().sum() > 0
    network.zero_grad()
    ev.values.pow(2).sum().backward()
    assert network.value_encoder.keys == [AGENT_KEY, CRITIC_KEY, "obs"]
    first = network.value_encoder.net[0].weight  # columns: agent_id (3), critic_state (7), obs (5)
    assert first.grad[:, K:K + 7].abs().sum() > 0
    assert network.pi.weight.grad is None and network.encoder.net[0].weight.grad is None
    assert network.encoder.net[0].weight.shape[1] == 5 + K  # the policy's encoder: obs and agent_id alone


def test_a_critic_state_needs_the_separate_value_mlp():
    with pytest.raises(ValueError, match="critic_state.*model.separate_value=true"):
        Policy(_space(), ACTIONS["discrete"], separate_value=False)


class RecordingEncoder(torch.nn.Module):
    """A custom encoder that remembers the keys it was built for and handed."""

    def __init__(self, obs_space, action_space):
        super().__init__()
        self.features_dim = 16
        self.built_for = sorted(obs_space.spaces)
        self.seen = None
        self.body = torch.nn.Linear(5, 16)

    def forward(self, obs):
        self.seen = sorted(obs)
        return torch.tanh(self.body(obs["obs"]))


class WholeNetwork(torch.nn.Module):
    def __init__(self, obs_space, action_space):
        super().__init__()
        self.body = torch.nn.Linear(5, 5)

    def forward(self, obs):
        out = self.body(obs["obs"])
        return out[:, :4], out[:, 4]


def test_a_custom_encoder_never_sees_the_critic_state_and_a_whole_network_is_refused():
    network = Policy(_space(), ACTIONS["discrete"], network=f"{__name__}:RecordingEncoder")
    assert CRITIC_KEY not in network.encoder.built_for
    out, value, _ = network(_obs(3, [0, 1, 2]))
    assert network.encoder.seen == sorted(["obs", AGENT_KEY]) and value.shape == (3,)
    with pytest.raises(ValueError, match="returns \\(params, value\\).*critic_state.*features_dim"):
        Policy(_space(), ACTIONS["discrete"], network=f"{__name__}:WholeNetwork")


def test_shared_parameters_take_the_agent_id_as_an_input_like_any_other_entry():
    space = _space(critic=False)
    assert MLPEncoder(space, (8,)).keys == [AGENT_KEY, "obs"]  # a Dict space's keys, in its (sorted) order
    assert MLPEncoder(_space(), (8,)).keys == [AGENT_KEY, "obs"]  # no critic_state for the policy
    assert MLPEncoder(_space(), (8,), critic=True).keys == [AGENT_KEY, CRITIC_KEY, "obs"]
    torch.manual_seed(0)
    network = build_policy(space, ACTIONS["discrete"], ModelConfig())
    obs = _obs(3, [0, 0, 0], critic=False)
    moved = dict(obs, **{AGENT_KEY: torch.from_numpy(agent_one_hot([1, 1, 1], K))})
    assert not torch.equal(network(obs)[0], network(moved)[0])


# ----- independent parameters ----------------------------------------------------------------------------------


def _bank(kind="discrete", critic=True, mask=0, seed=0):
    torch.manual_seed(seed)
    return build_policy(_space(critic=critic, mask=mask), ACTIONS[kind], ModelConfig(agents=K))


@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_each_row_is_scored_by_its_own_agents_network(kind):
    bank = _bank(kind)
    assert isinstance(bank, AgentBank) and len(bank.agents) == K
    t1, batch = 5, 4
    owners = np.array([[0, 1, 2, 1]] * t1)
    owners[2:, 3] = 0  # a column may change agents
    seq = _unroll(t1, batch, owners)
    actions = torch.stack([_actions(bank, {k: v[t] for k, v in seq.items()}, seed=t) for t in range(t1 - 1)])
    ev = bank.evaluate(seq, actions, bank.initial_state(batch), torch.zeros(t1 - 1, batch))
    for k, agent in enumerate(bank.agents):
        mine = torch.from_numpy(owners == k)  # [T+1, B]
        _, values, _ = agent({key: value[mine] for key, value in seq.items()})
        torch.testing.assert_close(ev.values[mine], values, rtol=1e-6, atol=1e-6)
        acting = mine[:-1]
        out, _, _ = agent({key: value[:-1][acting] for key, value in seq.items()})
        logp, entropy = agent.logp_entropy(out, actions[acting])
        torch.testing.assert_close(ev.logp[acting], logp, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ev.entropy[acting], entropy, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_a_loss_on_one_agents_rows_gives_the_others_exactly_zero_gradient(kind):
    bank = _bank(kind)
    owners = np.array([[0, 1, 0, 2]] * 4)
    seq = _unroll(4, 4, owners)
    actions = torch.stack([_actions(bank, {k: v[t] for k, v in seq.items()}) for t in range(3)])
    ev = bank.evaluate(seq, actions, bank.initial_state(4), torch.zeros(3, 4))
    mine = torch.from_numpy(owners == 0)
    (ev.logp[mine[:-1]].sum() + ev.entropy[mine[:-1]].sum() + ev.values[mine].pow(2).sum()).backward()
    for k, agent in enumerate(bank.agents):
        grads = [p.grad for p in agent.parameters()]
        if k == 0:
            assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0
        else:
            assert all(g is None or not g.any() for g in grads), k


@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_acting_is_seeded_and_a_one_agent_batch_acts_as_that_agents_network(kind):
    bank = _bank(kind, mask=0)
    obs = _obs(6, [0, 1, 2, 2, 1, 0])
    first, again = (bank.act(obs, generator=torch.Generator().manual_seed(5)) for _ in range(2))
    assert torch.equal(first.action, again.action) and torch.equal(first.logp, again.logp)
    other = bank.act(obs, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(first.logp, other.logp)
    for k, agent in enumerate(bank.agents):
        alone = _obs(5, [k] * 5, seed=k)
        ours = bank.act(alone, generator=torch.Generator().manual_seed(9))
        theirs = agent.act(alone, generator=torch.Generator().manual_seed(9))
        torch.testing.assert_close(ours.action, theirs.action, rtol=0, atol=0)
        torch.testing.assert_close(ours.logp, theirs.logp, rtol=1e-6, atol=1e-6)
    # central inference's path (forward, then the head on the CPU) samples what `act` does
    action, logp, state = batched_act(bank, obs, None, torch.device("cpu"), torch.Generator().manual_seed(5))
    assert torch.equal(action, first.action) and state is None
    torch.testing.assert_close(logp, first.logp)


def test_the_bank_masks_each_agents_logits_and_its_flat_minibatch_path_matches_evaluate():
    bank = _bank("discrete", mask=4)
    obs = _obs(64, np.arange(64) % K, mask=4)
    actions = bank.act(obs, generator=torch.Generator().manual_seed(0)).action
    assert bool(obs[MASK_KEY].gather(1, actions.unsqueeze(1)).all())
    out, values, _ = bank(obs)  # the PPO learner's flat minibatch: forward, then logp_entropy
    logp, _ = bank.logp_entropy(out, actions)
    seq = {key: torch.stack([value, value]) for key, value in obs.items()}  # [T+1 = 2, B = 64]
    ev = bank.evaluate(seq, actions.view(1, 64), bank.initial_state(64), torch.zeros(1, 64))
    torch.testing.assert_close(ev.logp[0], logp)
    torch.testing.assert_close(ev.values[0], values)


def test_the_bank_refuses_what_cannot_name_a_rows_agent():
    with pytest.raises(ValueError, match="agent_id.*one-hot float32 Box\\(3,\\)"):
        AgentBank(spaces.Box(-1, 1, (4,), np.float32), ACTIONS["discrete"], K)
    with pytest.raises(ValueError, match="one-hot Box\\(3,\\).*it is Box"):
        AgentBank(_space(agents=2), ACTIONS["discrete"], K)
    with pytest.raises(ValueError, match="lstm_size=8.*feed-forward"):
        AgentBank(_space(), ACTIONS["discrete"], K, lstm_size=8)


def test_model_agents_is_validated_in_the_config():
    assert load_experiment("cartpole-ppo", ["model.agents=3"]).model.agents == 3
    with pytest.raises(ConfigError, match="model.agents"):
        load_experiment("cartpole-ppo", ["model.agents=-1"])
    with pytest.raises(ConfigError, match="model.agents=2 with model.lstm_size=16"):
        ModelConfig(agents=2, lstm_size=16)
    for preset in ("pendulum-sac", "cartpole-apex"):
        with pytest.raises(ConfigError, match="model.agents=2: independent agents' networks are built for ppo"):
            load_experiment(preset, ["model.agents=2"])


@pytest.mark.parametrize("agents", [0, K])
def test_checkpoints_round_trip(agents):
    torch.manual_seed(0)
    first = build_policy(_space(), ACTIONS["tuple"], ModelConfig(agents=agents))
    torch.manual_seed(1)
    second = build_policy(_space(), ACTIONS["tuple"], ModelConfig(agents=agents))
    obs = _obs(6, [0, 1, 2, 0, 1, 2])
    assert not torch.equal(first(obs)[1], second(obs)[1])
    second.load_state_dict({k: v.clone() for k, v in first.state_dict().items()})
    for mine, theirs in zip(first(obs), second(obs)):
        if mine is not None:
            assert torch.equal(mine, theirs)
