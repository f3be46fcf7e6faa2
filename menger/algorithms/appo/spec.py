"""APPO: IMPALA's actors and V-trace targets, with PPO's clipped surrogate and epochs on each batch."""
from __future__ import annotations

from dataclasses import replace

from menger.algorithms import Algorithm
from menger.algorithms.impala.spec import ALGORITHM as IMPALA

ALGORITHM: Algorithm = replace(IMPALA, name="appo", summary="APPO: PPO's clip on V-trace targets, async",
                               presets=("pong-impala",))
