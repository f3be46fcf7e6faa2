"""Registers an id on import, like menger.apps.chip and menger.apps.cluster do."""

import gymnasium

if "MengerTestLazy-v0" not in gymnasium.registry:
    gymnasium.register("MengerTestLazy-v0", entry_point="menger_test_user_envs:CounterEnv")
