"""R2D2's config is refused up front where its sequences could not be cut, naming the key and a value that fits."""
import pytest

from menger.config import ConfigError
from menger.experiment import load_experiment


def test_the_r2d2_presets_load_and_their_unrolls_tile_into_sequences():
    for preset in ("r2d2", "cartpole-novel-r2d2", "memory-r2d2", "pong-r2d2"):
        cfg = load_experiment(preset)
        r2 = cfg.r2d2
        starts = list(r2.starts(cfg.runtime.unroll_length))
        assert starts[-1] + r2.sequence_length == cfg.runtime.unroll_length, preset
        assert cfg.model.lstm_size > 0 and cfg.coordination == "replay"


@pytest.mark.parametrize("overrides,expected", [
    (["model.lstm_size=0"], "model.lstm_size=0: r2d2 needs an LSTM core"),
    (["runtime.unroll_length=30"], "runtime.unroll_length=30 does not cut into sequences of r2d2.sequence_length=16 "
                                   "every r2d2.period=8 steps without leaving steps out; use runtime.unroll_length="
                                   "16 + k * 8 (e.g. 32)"),
    (["runtime.unroll_length=10"], "(e.g. 16)"),
    (["r2d2.burn_in=16"], "r2d2.burn_in=16 leaves nothing to learn from"),
    (["model.network=mypkg.nets:Net"], "model.network: r2d2 builds its own networks"),
])
def test_a_config_its_sequences_cannot_use_is_refused_naming_the_key(overrides, expected):
    with pytest.raises(ConfigError) as excinfo:
        load_experiment("cartpole-novel-r2d2", overrides)
    assert expected in str(excinfo.value)


def test_apex_refuses_an_lstm_core_and_points_at_r2d2():
    with pytest.raises(ConfigError) as excinfo:
        load_experiment("cartpole-apex", ["model.lstm_size=32"])
    assert "use algo r2d2 for a recurrent Q network" in str(excinfo.value)
