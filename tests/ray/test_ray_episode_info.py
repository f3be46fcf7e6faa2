"""env.info_keys on the ray launcher: the episode facts take the returns' path (the unroll's tag, returned by the
Ray actor's `unroll` call), so an env that succeeds every other episode shows episode/is_success_mean = 0.5."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray_harness import SMALL_RAY_RUN  # noqa: E402

from menger import api  # noqa: E402
from menger.logging import read_jsonl  # noqa: E402

RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "runtime"  # menger_test_info_envs: a user's own module


@pytest.fixture(scope="module")
def workers_import_the_env():
    """The module on the PYTHONPATH of the nodes this module's cluster starts (asked for before `cluster`)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RUNTIME_TESTS), saved]))
    sys.path.insert(0, str(RUNTIME_TESTS))
    yield
    sys.path.remove(str(RUNTIME_TESTS))
    if saved is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = saved


def test_is_success_reaches_the_metrics_from_ray_actors(workers_import_the_env, cluster, tmp_path):
    run_dir = tmp_path / "run"
    api.train("cartpole-ppo", [*SMALL_RAY_RUN, "runtime.actors=2", "runtime.unroll_length=16", "ppo.epochs=1",
                               "env.id=menger_test_info_envs:AlternatingSuccessEnv", "env.info_keys=[is_success]",
                               "stop.target_return=null", "stop.env_frames=1024"], run_dir=str(run_dir))
    records = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "episode/is_success_mean" in r]
    print(f"ray: {records[-1]['episode/count']} episodes, is_success_mean {records[-1]['episode/is_success_mean']}")
    assert records and all(r["episode/is_success_mean"] == 0.5 for r in records)
