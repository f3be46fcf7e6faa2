"""Applications built on Menger's API: chip macro placement (``menger.apps.chip``) and cluster scheduling
(``menger.apps.cluster``).

They sit at the top of the stack (only the CLI is above them), so they may use ``menger.api``. Their
gymnasium ids (``ChipPlacement-v0``, ``ClusterScheduling-v0``) are registered when the app package is
imported; ``menger.envs.make_vec_env`` finds them through the ``menger.env_providers`` entry points
declared in pyproject.toml, without the env layer naming the apps.
"""
