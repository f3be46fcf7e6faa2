"""How the ray launcher starts a local instance: Ray's calls are faked, so these take no Ray start-up."""
from __future__ import annotations

import logging

import pytest

pytest.importorskip("ray")

from menger.launch import ray as ray_launch  # noqa: E402

RAY_AUTH_LOG = "ray._private.authentication.authentication_token_setup"
RAY_OPT_OUT = ("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out. "
               "For more information, see https://docs.ray.io/en/latest/ray-security/token-auth.html")


class FakeRay:
    def __init__(self):
        self.init_kwargs = None

    def is_initialized(self):
        return self.init_kwargs is not None

    def init(self, **kwargs):
        self.init_kwargs = kwargs
        logging.getLogger(RAY_AUTH_LOG).warning(RAY_OPT_OUT)  # what Ray says when it turns token auth on
        logging.getLogger(RAY_AUTH_LOG).warning("some other warning of Ray's")

    def cluster_resources(self):
        return {"CPU": 2.0}


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay()
    monkeypatch.setattr(ray_launch, "ray", fake)
    return fake


def test_a_local_instance_keeps_token_auth_and_says_so_instead_of_rays_opt_out_advice(fake_ray, monkeypatch, caplog):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    caplog.set_level(logging.INFO)
    ray_launch.RayLauncher(runtime=None).connect(None)
    messages = [r.getMessage() for r in caplog.records]
    assert not any("opt out" in m for m in messages), messages
    assert "some other warning of Ray's" in messages  # only the advice to turn authentication off is dropped
    note = next(m for m in messages if m.startswith("started a local Ray instance (2 CPUs)"))
    assert "token authentication is on" in note and "docs/cluster.md" in note
    assert "RAY_AUTH_MODE" not in fake_ray.init_kwargs.get("runtime_env", {})  # nothing turns it off
    assert fake_ray.init_kwargs["address"] == "local" and fake_ray.init_kwargs["include_dashboard"] is False
    assert fake_ray.init_kwargs["_system_config"] == {"prestart_worker_first_driver": False,
                                                      "enable_worker_prestart": False, "worker_niceness": 0}
    assert not logging.getLogger(RAY_AUTH_LOG).filters  # the filter was only there while Ray started


def test_a_user_who_turned_auth_off_is_told_what_that_exposes(fake_ray, monkeypatch, caplog):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    caplog.set_level(logging.INFO)
    ray_launch.RayLauncher(runtime=None).connect(None)
    note = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("started a local Ray instance"))
    assert "OFF" in note and "unset RAY_AUTH_MODE" in note
    assert any(r.levelno == logging.WARNING and r.getMessage() == note for r in caplog.records)


def test_on_a_local_instance_more_actors_than_cpus_share_them_instead_of_waiting_for_cpus(fake_ray, caplog):
    from menger.experiment import load_experiment

    def requested(*overrides):
        launcher = ray_launch.RayLauncher(load_experiment("cartpole-impala", list(overrides)).runtime)
        return launcher.actor_cpus()

    assert requested("runtime.actors=2") == 1.0  # they fit the 2 CPUs: as configured
    with caplog.at_level(logging.INFO, logger="menger.launch.ray"):
        assert requested("runtime.actors=64") == 0.031  # 64 x 0.031 <= 2: every actor is placed
    assert "64 actors x runtime.ray.actor_cpus=1 do not fit this machine's 2 CPUs" in caplog.text
    assert requested("runtime.actors=64", "runtime.ray.address=auto") == 1.0  # a cluster: the user's request
