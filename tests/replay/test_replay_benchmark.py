"""benchmarks/replay.py runs end to end with tiny sizes (it lives outside the package and would rot unseen)."""
import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "replay.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("replay_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_replay_benchmark_prints_mengers_figures(tmp_path, capsys):
    benchmark = load_benchmark()
    result = benchmark.main(["--size", "4096", "--batch", "64", "--seconds", "0.01", "--rounds", "1",
                             "--json", str(tmp_path / "replay.json")])
    output = capsys.readouterr().out
    figures = result["figures"]
    assert set(figures) == {label for label, _, _ in benchmark.OPERATIONS}
    assert all(by_library["menger"] > 0 for by_library in figures.values())
    assert "load average (1 min)" in output and "prioritized sample" in output
    if "cpprb" in figures["prioritized sample"]:
        assert "menger/cpprb" in output
    else:
        assert "pip install cpprb" in output            # how to get the comparison, cpprb being no dependency
    assert (tmp_path / "replay.json").exists()


def test_the_replay_benchmark_measures_the_uniform_sampler_too(capsys):
    benchmark = load_benchmark()
    result = benchmark.main(["--size", "4096", "--batch", "64", "--seconds", "0.01", "--rounds", "1",
                             "--sampler", "uniform"])
    output = capsys.readouterr().out
    assert set(result["figures"]) == {label for label, _, _ in benchmark.UNIFORM_OPERATIONS}
    assert all(by_library["menger"] > 0 for by_library in result["figures"].values())
    assert "uniform sample" in output and "ReplayCoordinator, uniform" in output
    assert result["actors"]["samples_per_s"] > 0 and result["actors"]["actors_alive"]
