"""Composite action spaces, unit by unit: the product distribution against torch.distributions, the codec that
turns network actions into env actions (and refuses what an algorithm cannot act in), the slots' layout, masks,
and the custom network contract (an encoder in front of the heads and the LSTM core)."""
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import distributions as D

from menger.inference import sample_actions
from menger.models import ActionCodec, ActionHead, Policy, build_policy, num_action_params
from menger.models.actions import MAX_JOINT_ACTIONS
from menger.transport.shm import UnrollSpec

sys.path.insert(0, str(Path(__file__).parent))  # menger_test_space_envs: a user's own module

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
SPACES = {
    "multidiscrete": gym.spaces.MultiDiscrete([3, 4, 2]),           # uneven class counts: padded logits
    "multibinary": gym.spaces.MultiBinary(3),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(3), BOX)),
    "dict": gym.spaces.Dict({"md": gym.spaces.MultiDiscrete([2, 2]), "bits": gym.spaces.MultiBinary(2), "aim": BOX}),
}


def _reference(space: gym.Space, params: torch.Tensor, log_std: torch.Tensor):
    """The factors of `space`'s distribution as torch.distributions, with their columns of the flat action."""
    parts = list(space.spaces.values()) if isinstance(space, gym.spaces.Dict) else (
        list(space.spaces) if isinstance(space, gym.spaces.Tuple) else [space])
    out, p, a, g = [], 0, 0, 0
    for part in parts:
        if isinstance(part, gym.spaces.Discrete):
            out.append((D.Categorical(logits=params[:, p:p + part.n]), a, a + 1))
            p, a = p + part.n, a + 1
        elif isinstance(part, gym.spaces.MultiDiscrete):
            for n in part.nvec:
                out.append((D.Categorical(logits=params[:, p:p + n]), a, a + 1))
                p, a = p + int(n), a + 1
        elif isinstance(part, gym.spaces.MultiBinary):
            for _ in range(part.n):
                out.append((D.Bernoulli(logits=params[:, p]), a, a + 1))
                p, a = p + 1, a + 1
        else:
            d = int(np.prod(part.shape))
            out.append((D.Independent(D.Normal(params[:, p:p + d], log_std[g:g + d].exp()), 1), a, a + d))
            p, a, g = p + d, a + d, g + d
    return out


def _columns(dist, actions: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    if isinstance(dist, D.Categorical):
        return actions[:, lo].long()
    if isinstance(dist, D.Bernoulli):
        return actions[:, lo].float()
    return actions[:, lo:hi]


@pytest.mark.parametrize("name", sorted(SPACES))
def test_the_product_distribution_sums_its_factors_log_probs_and_entropies(name):
    space = SPACES[name]
    head = ActionHead(ActionCodec(space).leaves)
    gen = torch.Generator().manual_seed(0)
    params = torch.randn(64, head.num_params, generator=gen) * 2
    log_std = torch.randn(head.num_gaussian, generator=gen) * 0.3
    actions, logp_sampled = head.sample(params, log_std, gen)
    logp, entropy = head.log_prob_entropy(params, log_std, actions)
    factors = _reference(space, params, log_std)
    ref_logp = sum(dist.log_prob(_columns(dist, actions, lo, hi)) for dist, lo, hi in factors)
    ref_entropy = sum(dist.entropy() for dist, _, _ in factors)
    torch.testing.assert_close(logp, ref_logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logp_sampled, ref_logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, ref_entropy, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_the_deterministic_action_is_each_factors_mode(name):
    space = SPACES[name]
    head = ActionHead(ActionCodec(space).leaves)
    params = torch.randn(16, head.num_params, generator=torch.Generator().manual_seed(1))
    actions, _ = head.sample(params, torch.zeros(head.num_gaussian), deterministic=True)
    for dist, lo, hi in _reference(space, params, torch.zeros(head.num_gaussian)):
        if isinstance(dist, D.Categorical):
            expected = dist.probs.argmax(-1)
        elif isinstance(dist, D.Bernoulli):
            expected = (dist.probs > 0.5).long()
        else:
            expected = dist.mean
        torch.testing.assert_close(actions[:, lo:hi].squeeze(-1).to(expected.dtype), expected.squeeze(-1))


def test_a_squashed_mean_stays_inside_finite_bounds_and_scores_as_a_gaussian_about_it():
    # one Box with a bounded, an unbounded and a half-bounded entry, beside a Discrete component
    box = gym.spaces.Box(np.array([-2.0, -np.inf, 0.0], np.float32), np.array([4.0, np.inf, np.inf], np.float32))
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), box))
    head = ActionHead(ActionCodec(space).leaves, squash_mean=True)
    gen = torch.Generator().manual_seed(2)
    params = torch.randn(64, head.num_params, generator=gen) * 20  # means far past the bounds, as they drift
    log_std = torch.full((head.num_gaussian,), -1.0)
    means = params.clone()
    means[:, 3] = 1.0 + 3.0 * torch.tanh(params[:, 3])  # mid 1, half-width 3; the other two entries as they are

    mode, _ = head.sample(params, log_std, deterministic=True)
    torch.testing.assert_close(mode[:, 1:], means[:, 3:])
    assert mode[:, 1].abs().max() > 3.9 and mode[:, 1].min() >= -2.0 and mode[:, 1].max() <= 4.0
    actions, logp_sampled = head.sample(params, log_std, gen)
    logp, entropy = head.log_prob_entropy(params, log_std, actions)
    factors = _reference(space, means, log_std)
    ref_logp = sum(dist.log_prob(_columns(dist, actions, lo, hi)) for dist, lo, hi in factors)
    torch.testing.assert_close(logp, ref_logp, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(logp_sampled, ref_logp, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(entropy, sum(dist.entropy() for dist, _, _ in factors))
    unsquashed = ActionHead(ActionCodec(space).leaves)
    torch.testing.assert_close(unsquashed.sample(params, log_std, deterministic=True)[0][:, 1:], params[:, 3:])


def test_model_squash_mean_reaches_the_policy_and_is_refused_where_no_policy_network_reads_it():
    from menger.experiment import ConfigError, load_experiment

    exp = load_experiment("ppo", ["env.id=Pendulum-v1", "model.squash_mean=true"])
    policy = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)), exp.model, exp.algo)
    obs = torch.randn(4, 3, generator=torch.Generator().manual_seed(4))
    raw, _ = policy.action_params(obs)
    mode = policy.act(obs, deterministic=True).action
    torch.testing.assert_close(mode, 2.0 * torch.tanh(raw))  # bounds [-2, 2]: mid 0, half-width 2
    with pytest.raises(ConfigError, match="model.squash_mean=true .* algo sac .* unset model.squash_mean"):
        load_experiment("sac", ["model.squash_mean=true"])


def test_sampled_components_follow_their_own_probabilities():
    space = gym.spaces.MultiDiscrete([2, 3])
    head = ActionHead(ActionCodec(space).leaves)
    probs = [torch.tensor([0.2, 0.8]), torch.tensor([0.5, 0.3, 0.2])]
    params = torch.cat([p.log() for p in probs]).expand(20000, -1)
    actions, _ = head.sample(params, None, torch.Generator().manual_seed(3))
    for k, p in enumerate(probs):
        freq = torch.bincount(actions[:, k], minlength=len(p)).float() / len(actions)
        torch.testing.assert_close(freq, p, atol=0.015, rtol=0)  # 20000 draws: a standard error under 0.004


@pytest.mark.parametrize("name", sorted(SPACES))
def test_policy_act_gives_env_actions_and_central_sampling_agrees(name):
    space = SPACES[name]
    policy = Policy(gym.spaces.Box(-1, 1, (5,)), space)
    obs = torch.randn(6, 5)
    out = policy.act(obs, generator=torch.Generator().manual_seed(7))
    for action in policy.codec.to_env(out.action.numpy()):
        assert space.contains(action), (action, space)
    params, _, _ = policy(obs)
    action, logp = sample_actions(policy, params, torch.Generator().manual_seed(7))  # central inference's path
    torch.testing.assert_close(action, out.action)
    torch.testing.assert_close(logp, out.logp)
    new_logp, _ = policy.logp_entropy(params, out.action)
    torch.testing.assert_close(new_logp, out.logp, rtol=1e-5, atol=1e-5)


def test_evaluate_scores_an_unroll_of_composite_actions_with_an_lstm_core():
    space = SPACES["tuple"]
    policy = Policy(gym.spaces.Box(-1, 1, (5,)), space, lstm_size=8)
    t, b = 4, 3
    obs = torch.randn(t + 1, b, 5)
    state, actions, logps = policy.initial_state(b), [], []
    for step in range(t):
        out = policy.act(obs[step], state, generator=torch.Generator().manual_seed(step))
        state = out.state
        actions.append(out.action)
        logps.append(out.logp)
    ev = policy.evaluate(obs, torch.stack(actions), policy.initial_state(b), torch.zeros(t, b))
    torch.testing.assert_close(ev.logp, torch.stack(logps), rtol=1e-5, atol=1e-5)
    assert ev.entropy.shape == (t, b) and ev.values.shape == (t + 1, b)


def test_a_multidiscrete_mask_keeps_masked_classes_from_being_sampled():
    space = gym.spaces.MultiDiscrete([3, 2])
    obs_space = gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,)), "action_mask": gym.spaces.MultiBinary(5)})
    policy = Policy(obs_space, space)
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0]]).expand(500, -1)
    out = policy.act({"x": torch.rand(500, 2), "action_mask": mask}, generator=torch.Generator().manual_seed(0))
    assert set(out.action[:, 0].tolist()) <= {0, 2} and set(out.action[:, 1].tolist()) == {1}
    bad = gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,)), "action_mask": gym.spaces.MultiBinary(3)})
    with pytest.raises(ValueError, match="action_mask has 3 entries.*5 logits"):
        Policy(bad, space)


# ----- what each family acts in ----------------------------------------------------------------------------
def test_q_learning_acts_in_one_joint_discrete_and_the_env_gets_the_components():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.MultiDiscrete([2, 4]), gym.spaces.MultiBinary(2)))
    codec = ActionCodec(space, "apex")
    assert codec.space == gym.spaces.Discrete(3 * 2 * 4 * 2 * 2)
    joint = np.arange(codec.space.n)
    np.testing.assert_array_equal(codec.ravel(codec.unravel(joint)), joint)
    env_actions = codec.to_env(joint)
    assert len({repr(a) for a in env_actions}) == codec.space.n  # every joint action is a different env action
    assert all(space.contains(a) for a in env_actions)
    q = build_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.MultiDiscrete([3, 3]),
                     _model(hidden=(16,)), "apex")
    assert q.action_space == gym.spaces.Discrete(9) and q.codec.joint_sizes == (3, 3)


def test_q_learning_refuses_a_joint_space_past_the_limit_naming_it_and_ppo():
    with pytest.raises(ValueError, match=f"100000 joint actions.*{MAX_JOINT_ACTIONS}.*ppo"):
        ActionCodec(gym.spaces.MultiDiscrete([10] * 5), "apex")
    with pytest.raises(ValueError, match="r2d2 needs discrete actions.*Box component.*use algo sac"):
        ActionCodec(SPACES["tuple"], "r2d2")


def test_sac_flattens_boxes_and_refuses_a_discrete_component():
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,)), "b": gym.spaces.Box(0, 3, (1,))})
    codec = ActionCodec(space, "sac")
    assert codec.space == gym.spaces.Box(np.array([-1, -1, 0], np.float32), np.array([1, 1, 3], np.float32))
    (first,) = codec.to_env(np.array([[0.5, 2.0, 5.0]], np.float32))
    np.testing.assert_allclose(first["a"], [0.5, 1.0])  # clipped to each component's bounds
    np.testing.assert_allclose(first["b"], [3.0])
    with pytest.raises(ValueError, match="sac needs continuous.*Discrete\\(3\\).*ppo, impala or appo"):
        ActionCodec(SPACES["tuple"], "sac")


def test_policy_gradient_slots_hold_indices_or_a_flat_float_vector():
    spaces_and_fields = [(gym.spaces.Discrete(4), (), torch.int64), (BOX, (2,), torch.float32),
                         (SPACES["multidiscrete"], (3,), torch.int64), (SPACES["multibinary"], (3,), torch.int64),
                         (SPACES["tuple"], (3,), torch.float32), (SPACES["dict"], (6,), torch.float32)]
    for space, shape, dtype in spaces_and_fields:
        acting = ActionCodec(space, "ppo").space
        field_shape, field_dtype = UnrollSpec(gym.spaces.Box(-1, 1, (2,)), acting, 5, 3).field_shapes()["actions"]
        assert (field_shape, field_dtype) == ((5, 3, *shape), dtype), space


def test_unsupported_spaces_are_refused_saying_why():
    nested = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Tuple((gym.spaces.Discrete(2),))))
    with pytest.raises(ValueError, match="nests Tuple.*one level"):
        ActionCodec(nested)
    with pytest.raises(ValueError, match="unsupported action space.*Text"):
        ActionCodec(gym.spaces.Text(5))


# ----- custom networks ---------------------------------------------------------------------------------------
def _model(**kwargs):
    from menger.experiment import ModelConfig

    return ModelConfig(**kwargs)


@pytest.mark.parametrize("lstm_size", [0, 8])
def test_a_custom_encoder_serves_box_and_composite_actions_with_or_without_the_lstm_core(lstm_size):
    obs_space = gym.spaces.Box(-1, 1, (3,))
    for space in (BOX, SPACES["tuple"]):
        policy = build_policy(obs_space, space, _model(network="menger_test_space_envs:FeaturesNet",
                                                       kwargs={"width": 16}, lstm_size=lstm_size))
        assert policy.encoder.features_dim == 16 and policy.pi.in_features == (lstm_size or 16)
        state = policy.initial_state(4) if lstm_size else None
        out = policy.act(torch.randn(4, 3), state, generator=torch.Generator().manual_seed(0))
        assert all(space.contains(a) for a in policy.codec.to_env(out.action.numpy()))
        assert (out.state.shape == (2, 4, lstm_size)) if lstm_size else out.state is None


def test_a_custom_policy_network_gives_the_mean_of_box_actions_and_menger_the_log_std():
    policy = build_policy(gym.spaces.Box(-1, 1, (3,)), BOX, _model(network="menger_test_space_envs:MeanValueNet",
                                                                  init_log_std=-0.5))
    assert policy.log_std.shape == (2,) and policy.log_std.detach().tolist() == [-0.5, -0.5]
    obs = torch.randn(5, 3)
    mean, value = policy.custom(obs)
    out = policy.act(obs, deterministic=True)
    torch.testing.assert_close(out.action, mean)
    assert value.shape == (5,)


def test_a_custom_network_that_does_not_fit_the_space_is_refused_before_training():
    with pytest.raises(ValueError, match=r"returned params \(2, 2\).*needs params \(2, 5\)"):
        build_policy(gym.spaces.Box(-1, 1, (3,)), SPACES["tuple"],
                     _model(network="menger_test_space_envs:MeanValueNet", kwargs={"params": 2}))  # not 3 + 2
    with pytest.raises(ValueError, match="features_dim"):
        build_policy(gym.spaces.Box(-1, 1, (3,)), BOX, _model(network="menger_test_space_envs:MeanValueNet",
                                                             lstm_size=8))
    assert num_action_params(SPACES["tuple"]) == 5 and num_action_params(SPACES["dict"]) == 8


def test_a_subclass_of_discrete_acts_as_a_lone_discrete():
    """An env's own Discrete subclass (chip placement's MaskedDiscrete) gives actions [N], as Discrete does."""
    class Custom(gym.spaces.Discrete):
        pass

    head = ActionHead(ActionCodec(Custom(5), "ppo").leaves)
    action, logp = head.sample(torch.zeros(3, 5), None)
    assert head.discrete and action.shape == (3,) and logp.shape == (3,)
