"""Resolving env ids: clear errors with suggestions, and lazy imports of extra env providers (named in
``LAZY_ENV_PROVIDERS`` or by ``menger.env_providers`` entry points)."""

import subprocess
import sys

import numpy as np
import torch
import pytest

from menger.envs import UnknownEnvError, make_vec_env, resolve_env
from menger.envs.make import env_providers


@pytest.mark.parametrize("typo, suggestion", [("CartPol-v1", "CartPole-v1"), ("cartpole-v1", "CartPole-v1"),
                                              ("Pendulum-v7", "Pendulum-v1")])
def test_unknown_id_suggests_the_closest_registered_id(typo, suggestion):
    with pytest.raises(UnknownEnvError, match=f"Unknown environment id '{typo}'.*Did you mean: {suggestion}"):
        make_vec_env(typo, 2, seed=0)


def test_user_module_that_cannot_be_imported_is_named():
    with pytest.raises(UnknownEnvError, match="Cannot import module 'no_such_package.envs'"):
        make_vec_env("no_such_package.envs:MyEnv", 2, seed=0)


def test_missing_attribute_suggests_a_close_name(user_envs_on_path):
    with pytest.raises(UnknownEnvError, match="no attribute 'CountrEnv'.*Did you mean: CounterEnv"):
        make_vec_env("menger_test_user_envs:CountrEnv", 2, seed=0)


def test_attribute_that_is_not_an_env_is_refused(user_envs_on_path):
    with pytest.raises(UnknownEnvError, match="not a gymnasium.Env or VectorEnv"):
        make_vec_env("menger_test_user_envs:NOT_AN_ENV", 2, seed=0)


def test_factories_are_classified_by_their_num_envs_argument(user_envs_on_path):
    assert resolve_env("menger_test_user_envs:make_bandit_vector")[0] is True
    assert resolve_env("menger_test_user_envs:make_counter")[0] is False


def test_unknown_preset_and_non_atari_id_are_refused():
    with pytest.raises(ValueError, match="Did you mean: atari"):
        make_vec_env("ALE/Pong-v5", 2, seed=0, preset="atary")
    with pytest.raises(ValueError, match="Did you mean: ALE/Pong-v5"):
        make_vec_env("ALE/Pongg-v5", 2, seed=0, preset="atari")


def test_bad_num_envs_is_refused():
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        make_vec_env("CartPole-v1", 0, seed=0)


def test_ale_ids_resolve_without_importing_ale_first():
    """Importing menger.envs stays light; the ALE namespace is imported the first time an id needs it."""
    script = (
        "import sys\n"
        "from menger.envs import make_vec_env\n"
        "assert 'ale_py' not in sys.modules\n"
        "env = make_vec_env('ALE/Pong-v5', 1, seed=0)\n"
        "print(env.reset().shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 4, 84, 84)"


def _install_fake_distribution(root, entry_points: str) -> None:
    """A distribution on sys.path that declares ``entry_points``, as ``pip install`` of a plugin would."""
    info = root / "menger_test_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: menger-test-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_provider_module_declared_as_an_entry_point_registers_its_ids(user_envs_on_path, tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, "[menger.env_providers]\nlazy = menger_test_lazy_provider\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_vec_env("MengerTestLazy-v0", 2, seed=0)
    assert env.reset().shape == (2, 1)


def test_ids_of_entry_point_providers_resolve(user_envs_on_path, tmp_path, monkeypatch):
    """A package declaring a ``menger.env_providers`` entry point gets its ids resolved, module or function."""
    import gymnasium

    (tmp_path / "menger_test_plugin.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('MengerTestPluginModule-v0', entry_point='menger_test_user_envs:CounterEnv')\n"
        "def register():\n"
        "    gymnasium.register('MengerTestPluginFunction-v0', entry_point='menger_test_user_envs:CounterEnv')\n"
    )
    _install_fake_distribution(tmp_path, "[menger.env_providers]\nmodule = menger_test_plugin\n"
                                         "function = menger_test_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ids = ("MengerTestPluginModule-v0", "MengerTestPluginFunction-v0")
    assert not any(env_id in gymnasium.registry for env_id in ids)
    try:
        assert {"menger_test_plugin", "menger_test_plugin:register"} <= set(env_providers())
        for env_id in ids:
            assert make_vec_env(env_id, 2, seed=0).reset().shape == (2, 1)
    finally:
        for env_id in ids:
            gymnasium.registry.pop(env_id, None)
        sys.modules.pop("menger_test_plugin", None)


def test_an_id_a_package_registers_when_imported_resolves_as_package_colon_id(user_envs_on_path, tmp_path,
                                                                           monkeypatch):
    """gymnasium 1.x loads no plugins by itself: 'package:Id' imports the package, whose import registers Id."""
    import gymnasium

    (tmp_path / "menger_test_registers.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('MengerTestRegistered-v0', entry_point='menger_test_user_envs:CounterEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(UnknownEnvError, match="'package:Id'"):  # the error names the form
            make_vec_env("MengerTestRegistered-v0", 2, seed=0)
        assert make_vec_env("menger_test_registers:MengerTestRegistered-v0", 2, seed=0).reset().shape == (2, 1)
    finally:
        gymnasium.registry.pop("MengerTestRegistered-v0", None)
        sys.modules.pop("menger_test_registers", None)


def test_a_built_in_provider_registers_by_its_function_and_one_not_installed_is_passed_over(
        user_envs_on_path, tmp_path, monkeypatch):
    """LAZY_ENV_PROVIDERS (ale_py, MinAtar's register_envs): a "module:function" provider is called when an id is
    unknown; one whose package is not installed is skipped without a word in the unknown-id error."""
    import gymnasium

    from menger.envs import make

    (tmp_path / "menger_test_registrar.py").write_text(
        "import gymnasium\n"
        "def register_envs():\n"
        "    gymnasium.register('MengerTestRegistrar-v0', entry_point='menger_test_user_envs:CounterEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(make, "LAZY_ENV_PROVIDERS", ("menger_no_such_optional_package.sub:register",
                                                     "menger_test_registrar:register_envs"))
    try:
        assert make_vec_env("MengerTestRegistrar-v0", 2, seed=0).reset().shape == (2, 1)
        with pytest.raises(UnknownEnvError) as error:
            make_vec_env("NoSuchEnvAnywhere-v0", 2, seed=0)
        assert "menger_no_such_optional_package" not in str(error.value)
    finally:
        gymnasium.registry.pop("MengerTestRegistrar-v0", None)
        sys.modules.pop("menger_test_registrar", None)


def test_minatar_ids_resolve_without_naming_the_package():
    pytest.importorskip("minatar")
    env = make_vec_env("MinAtar/Breakout-v1", 2, seed=0)
    assert env.reset().shape == (2, 10, 10, 4)


def test_an_entry_point_provider_that_fails_is_reported_with_the_unknown_id(tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, "[menger.env_providers]\nbroken = menger_no_such_plugin_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownEnvError, match="menger_no_such_plugin_module could not be imported"):
        make_vec_env("NoSuchEnvAnywhere-v0", 2, seed=0)


def test_the_apps_ids_resolve_through_their_entry_points():
    """The installed package declares the apps as providers: their ids resolve in a fresh interpreter without
    importing menger.apps first, and importing menger.envs does not import the apps (they are above it)."""
    script = (
        "import sys\n"
        "from menger.envs import make_vec_env\n"
        "from menger.envs.make import env_providers\n"
        "assert not any(name.startswith('menger.apps') for name in sys.modules)\n"
        "assert {'menger.apps.chip', 'menger.apps.cluster'} <= set(env_providers()), "
        "f'{env_providers()}: no entry points of the apps; re-run pip install -e . to refresh them'\n"
        "chip = make_vec_env('ChipPlacement-v0', 1, seed=0, kwargs={'netlist': 'macro_tiles_10x10'})\n"
        "print(sorted(chip.reset()))\n"
        "print(make_vec_env('ClusterScheduling-v0', 1, seed=0).reset().shape)\n"
        "import gymnasium\n"
        "print(gymnasium.spec('ChipPlacement-v0').entry_point)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "grid_maps" in lines[0]
    assert lines[1] == "(1, 20, 124)"
    assert lines[2] == "menger.apps.chip.env:ChipPlacementEnv"


def test_atari_sticky_actions_follow_the_env_id():
    from menger.envs.atari import id_settings

    assert id_settings("ALE/Pong-v5")["repeat_action_probability"] == 0.25
    assert id_settings("PongNoFrameskip-v4")["repeat_action_probability"] == 0.0
    assert id_settings("pong")["repeat_action_probability"] == 0.25  # a bare ROM name: the v5 protocol


def test_the_atari_preset_reports_the_games_own_rewards_not_clipped_ones():
    """Space Invaders pays 5 to 30 for an alien: a return clipped to [-1, 1] per step is no paper's figure."""
    env = make_vec_env("SpaceInvadersNoFrameskip-v4", 2, seed=0, preset="atari")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    largest = 0.0
    for _ in range(400):
        result = env.step(rng.integers(0, 6, 2))
        largest = max(largest, float(np.max(result.reward)))
        if largest > 1:
            break
    env.close()
    assert largest >= 5


def test_a_tuple_observation_comes_as_a_dict_of_its_entries_that_every_network_reads(tmp_path, monkeypatch):
    import gymnasium

    from menger.experiment import ModelConfig
    from menger.models import build_policy

    (tmp_path / "menger_test_tuple_env.py").write_text(
        "import gymnasium as gym, numpy as np\n"
        "class TupleEnv(gym.Env):\n"
        "    observation_space = gym.spaces.Tuple((gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(4)))\n"
        "    action_space = gym.spaces.Discrete(2)\n"
        "    def reset(self, seed=None, options=None):\n"
        "        return (np.zeros(3, np.float32), 2), {}\n"
        "    def step(self, action):\n"
        "        return (np.ones(3, np.float32), 1), 1.0, True, False, {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        env = make_vec_env("menger_test_tuple_env:TupleEnv", 2, seed=0)
        space = env.single_observation_space
        assert isinstance(space, gymnasium.spaces.Dict) and list(space.spaces) == ["0", "1"]
        obs = env.reset()
        assert obs["0"].shape == (2, 3) and obs["1"].tolist() == [2, 2]
        for algo in ("ppo", "apex"):
            policy = build_policy(space, env.single_action_space, ModelConfig(hidden=(8,)), algo)
            batch = {"0": torch.as_tensor(obs["0"]), "1": torch.as_tensor(obs["1"]).float()}
            assert policy.act(batch, None, deterministic=True).action.shape == (2,)
    finally:
        sys.modules.pop("menger_test_tuple_env", None)


def test_catch_resets_on_the_next_step_and_pays_at_the_bottom():
    env = make_vec_env("menger/Catch-v0", 3, seed=0)
    obs = env.reset(seed=0)
    assert obs.shape == (3, 1, 80, 40) and obs.dtype == np.uint8
    rewards = []
    for _ in range(9):  # the ball falls 9 rows: the 9th step lands it
        result = env.step(np.ones(3, dtype=np.int64))  # stay
        rewards.append(result.reward)
    assert result.terminated.all() and result.valid.all()
    assert set(np.abs(rewards[-1]).tolist()) == {1.0} and not np.any(rewards[:-1])
    reset = env.step(np.zeros(3, dtype=np.int64))  # ALE-style: this step only resets, its action is ignored
    assert not reset.valid.any() and not reset.terminated.any() and not reset.reward.any()
    assert (reset.obs[:, 0, :8].max(axis=(1, 2)) == 255).all()  # a new ball in the top row
