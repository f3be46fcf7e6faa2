"""Logging layer: JSONL durability, fan-out isolation, TensorBoard output, terminal progress."""

from __future__ import annotations

import io
import json
import math
import warnings

import pytest
from rich.console import Console

from menger.logging import (
    JsonlLogger,
    Logger,
    MultiLogger,
    TensorBoardLogger,
    TerminalProgress,
    read_jsonl,
    summary_rows,
)
from menger.logging.format import format_count, format_duration
from menger.logging.progress import PLAIN_INTERVAL_S

METRICS = {
    "time/wall_s": 63.0,
    "time/env_frames": 25_000.0,
    "time/env_frames_produced": 30_000.0,
    "actor/fps": 12_345.0,
    "learner/fps": 12_000.0,
    "learner/updates_per_s": 4.5,
    "learner/policy_lag_mean": 1.25,
    "learner/policy_lag_max": 3.0,
    "episode/return_mean": 45.5,
    "episode/count": 120.0,
    "transport/frames_dropped": 120.0,
    "transport/frames_dropped/stale": 100.0,
    "transport/frames_dropped/nan": 20.0,
    "actor/restarts": 1.0,
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingLogger:
    def __init__(self) -> None:
        self.writes: list[tuple[dict, int]] = []
        self.closed = 0

    def write(self, metrics, step):
        self.writes.append((dict(metrics), step))

    def close(self):
        self.closed += 1


class BrokenLogger(RecordingLogger):
    def write(self, metrics, step):
        raise OSError(28, "No space left on device")


def test_jsonl_round_trip_and_append_on_reopen(tmp_path):
    path = tmp_path / "run" / "metrics.jsonl"
    with JsonlLogger(path) as logger:
        logger.write({"learner/loss": 0.5, "learner/updates": 3}, step=100)
        logger.write({"learner/loss": 0.25, "learner/updates": 4}, step=200)
    with JsonlLogger(path) as resumed:
        resumed.write({"learner/loss": 0.125}, step=300)

    records = read_jsonl(path)
    assert records == [
        {"step": 100, "learner/loss": 0.5, "learner/updates": 3},
        {"step": 200, "learner/loss": 0.25, "learner/updates": 4},
        {"step": 300, "learner/loss": 0.125},
    ]


def test_jsonl_is_flushed_after_each_write(tmp_path):
    path = tmp_path / "metrics.jsonl"
    logger = JsonlLogger(path)
    logger.write({"actor/fps": 10.0}, step=1)
    assert read_jsonl(path) == [{"step": 1, "actor/fps": 10.0}]
    logger.close()


def test_jsonl_writes_non_finite_values_as_null(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with JsonlLogger(path) as logger:
        logger.write({"learner/loss": float("nan"), "learner/approx_kl": math.inf, "actor/fps": 3.0}, step=7)
    line = path.read_text().strip()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line) == {"step": 7, "learner/loss": None, "learner/approx_kl": None, "actor/fps": 3.0}


def test_jsonl_rejects_a_non_numeric_metric_naming_the_key(tmp_path):
    with JsonlLogger(tmp_path / "metrics.jsonl") as logger, pytest.raises(TypeError, match="learner/note"):
        logger.write({"learner/note": "diverged"}, step=1)


def test_read_jsonl_skips_a_truncated_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "actor/fps": 2.0}\n{"step": 2, "actor/fps": 3.0}\n{"step": 3, "actor/f')
    assert read_jsonl(path) == [{"step": 1, "actor/fps": 2.0}, {"step": 2, "actor/fps": 3.0}]


def test_read_jsonl_refuses_a_damaged_middle_line_with_its_number(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2"):
        read_jsonl(path)


def test_resuming_after_a_crash_mid_write_drops_the_fragment_and_keeps_the_file_valid(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "actor/fps": 2.0}\n{"step": 2, "actor/f')
    with pytest.warns(RuntimeWarning, match="partial record"):
        logger = JsonlLogger(path)
    logger.write({"actor/fps": 4.0}, step=3)
    logger.close()
    assert read_jsonl(path) == [{"step": 1, "actor/fps": 2.0}, {"step": 3, "actor/fps": 4.0}]


def test_a_complete_last_record_without_newline_is_kept_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "actor/fps": 2.0}')
    with JsonlLogger(path) as logger:
        logger.write({"actor/fps": 4.0}, step=2)
    assert [record["step"] for record in read_jsonl(path)] == [1, 2]


def test_multilogger_fans_out_and_isolates_a_failing_logger(tmp_path):
    good, broken = RecordingLogger(), BrokenLogger()
    logger = MultiLogger(broken, good)
    with pytest.warns(RuntimeWarning, match="BrokenLogger.*disabled.*No space left") as caught:
        logger.write({"actor/fps": 1.0}, step=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second report of the same failure would raise here
        logger.write({"actor/fps": 2.0}, step=2)
        logger.close()

    assert len(caught) == 1
    assert good.writes == [({"actor/fps": 1.0}, 1), ({"actor/fps": 2.0}, 2)]
    assert logger.active == ()
    assert good.closed == 1 and broken.closed == 1


def test_all_backends_satisfy_the_logger_protocol(tmp_path):
    console = Console(file=io.StringIO())
    with JsonlLogger(tmp_path / "m.jsonl") as jsonl:
        assert isinstance(jsonl, Logger)
    assert isinstance(TerminalProgress("x", console=console), Logger)
    assert isinstance(MultiLogger(), Logger)


def test_tensorboard_logger_writes_scalars_that_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with TensorBoardLogger(tmp_path / "tb") as logger:
        logger.write({"learner/loss": 0.5, "actor/fps": 100.0}, step=10)
        logger.write({"learner/loss": 0.25, "actor/fps": 120.0}, step=20)
    event_files = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert event_files and event_files[0].stat().st_size > 0

    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    losses = [(scalar.step, scalar.value) for scalar in events.Scalars("learner/loss")]
    assert losses == [(10, 0.5), (20, 0.25)]


def test_terminal_progress_off_a_tty_prints_plain_lines_with_frames_and_return():
    output = io.StringIO()
    progress = TerminalProgress("cartpole-ppo", target_return=195.0, total_frames=100_000, console=Console(file=output))
    assert not progress.live
    progress.write(METRICS, step=25_000)
    progress.close()

    text = output.getvalue()
    assert text.count("\n") == 1
    assert "[cartpole-ppo]" in text
    assert "frames 25k / 100k (25.0%)" in text
    assert "return 45.5 (target 195)" in text
    assert "drops 120 (0.4%; nan 20, stale 100)" in text
    assert "\x1b[" not in text  # no terminal escapes in CI logs


def test_terminal_progress_prints_at_most_one_plain_line_per_interval_and_a_last_one_on_close():
    output, clock = io.StringIO(), FakeClock()
    progress = TerminalProgress("run", console=Console(file=output), enabled=False, clock=clock)
    for frames in (1_000, 2_000, 3_000):
        progress.write({"episode/return_mean": frames / 100}, step=frames)
        clock.now += PLAIN_INTERVAL_S / 4
    clock.now += PLAIN_INTERVAL_S
    progress.write({"episode/return_mean": 40.0}, step=4_000)
    progress.write({"episode/return_mean": 50.0}, step=5_000)
    progress.close()
    progress.close()

    lines = output.getvalue().splitlines()
    assert [line.split(" | ")[0] for line in lines] == ["[run] frames 1k", "[run] frames 4k", "[run] frames 5k"]


def test_terminal_progress_disabled_on_a_terminal_still_prints_plain_lines():
    output = io.StringIO()
    progress = TerminalProgress("run", console=Console(file=output, force_terminal=True), enabled=False)
    progress.write(METRICS, step=25_000)
    progress.close()
    assert not progress.live and output.getvalue().startswith("[run] frames 25k")


def test_terminal_progress_live_view_renders_the_table_and_flags_stalls():
    output, clock = io.StringIO(), FakeClock()
    console = Console(file=output, force_terminal=True, width=120)
    progress = TerminalProgress("cartpole-ppo", target_return=195.0, total_frames=100_000, console=console, clock=clock)
    assert progress.live
    progress.write(METRICS, step=25_000)
    clock.now += 30.0
    progress.close()

    text = output.getvalue()
    assert "menger: cartpole-ppo" in text and "25k / 100k" in text and "45.5 (target 195)" in text
    assert "no new metrics for 30s" in text


def test_summary_rows_leave_out_absent_metrics_and_judge_the_target():
    rows = dict(summary_rows({"time/env_frames": 100_000, "time/wall_s": 50.0, "episode/return_mean": 480.0}, 475.0))
    assert rows == {
        "env frames (learned from)": "100k",
        "wall time": "50s",
        "average frames/s": "2k",
        "mean return (last 20 episodes)": "480 (target 475, reached)",
    }


@pytest.mark.parametrize(
    ("value", "text"), [(None, "-"), (float("nan"), "-"), (950, "950"), (1_234_567, "1.23M"), (2.5e9, "2.5G")]
)
def test_format_count(value, text):
    assert format_count(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(4.24, "4.2s"), (42.0, "42s"), (185.0, "3m05s"), (7620.0, "2h07m")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def _run_start(tmp_path, **overrides):
    from menger.logging import RunStart

    fields = dict(name="cartpole-ppo-1", run_dir=tmp_path, config={"algo": "ppo", "ppo": {"lr": 0.002}},
                  config_text="algo: ppo\nppo:\n  lr: 0.002\n",
                  hparams={"algo": "ppo", "ppo.lr": 0.002, "runtime.actors": 2, "ppo.normalize_advantages": True})
    return RunStart(**{**fields, **overrides})


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def _session_hparams(folder) -> dict:
    from tensorboard.plugins.hparams import metadata

    content = _events(folder).PluginTagToContent("hparams")["_hparams_/session_start_info"]
    info = metadata.parse_session_start_info_plugin_data(content)
    return {key: getattr(value, value.WhichOneof("kind")) for key, value in info.hparams.items()}


def _last(scalars):
    """The value at the highest step: TensorBoard orders events files by name, which within one second and one
    process is not the order they were written in."""
    return max(scalars, key=lambda scalar: scalar.step)


def _texts(folder) -> list[tuple[int, str]]:
    texts = _events(folder).Tensors("config/text_summary")  # torch's add_text names the tag so
    return sorted((event.step, event.tensor_proto.string_val[0].decode()) for event in texts)


def test_tensorboard_writes_the_config_as_text_and_the_hyperparameters_for_the_hparams_tab(tmp_path):
    clock = FakeClock()
    with TensorBoardLogger(tmp_path / "tb", clock=clock) as logger:
        logger.start(_run_start(tmp_path))
        logger.write({"episode/return_mean": 20.0}, step=100)
        clock.now += 1.0  # within SUMMARY_EVERY_S: kept for the next summary, or the close
        logger.write({"episode/return_mean": 35.0}, step=200)
        logger.write({"episode/return_mean": 30.0}, step=300)

    [(step, text)] = _texts(tmp_path / "tb")
    assert step == 0 and "```yaml\nalgo: ppo\nppo:\n  lr: 0.002\n```" in text
    assert _session_hparams(tmp_path / "tb" / "hparams") == {
        "algo": "ppo", "ppo.lr": 0.002, "runtime.actors": 2.0, "ppo.normalize_advantages": True}
    summary = _events(tmp_path / "tb" / "hparams")
    last = {tag: _last(summary.Scalars(tag)) for tag in summary.Tags()["scalars"]}
    assert {tag: (s.step, s.value) for tag, s in last.items()} == {
        "hparams/return_mean": (300, 30.0), "hparams/return_mean_best": (300, 35.0), "hparams/env_frames": (300, 300.0)}
    assert sorted(s.step for s in summary.Scalars("hparams/return_mean")) == [100, 300]  # the first write, then the close
    assert "episode/return_mean" not in summary.Tags()["scalars"]  # the HParams tab's metrics are the summary alone


def test_a_resumed_run_keeps_its_session_and_best_and_adds_only_what_changed(tmp_path):
    with TensorBoardLogger(tmp_path / "tb") as logger:
        logger.start(_run_start(tmp_path))
        logger.write({"episode/return_mean": 50.0, "eval/return_mean": 40.0}, step=100)
    with TensorBoardLogger(tmp_path / "tb") as logger:  # resumed, nothing changed
        logger.start(_run_start(tmp_path, step=100, resumed=True))
        logger.write({"episode/return_mean": 45.0, "eval/return_mean": 60.0}, step=200)
    with TensorBoardLogger(tmp_path / "tb") as logger:  # resumed with a longer budget
        logger.start(_run_start(tmp_path, step=200, resumed=True, hparams={"algo": "ppo", "ppo.lr": 0.5},
                                changes={"stop.env_frames": (1000, 5000)}))
        logger.write({"episode/return_mean": 48.0}, step=300)

    texts = _texts(tmp_path / "tb")
    assert [step for step, _ in texts] == [0, 200]
    assert "resumed at 200 env frames" in texts[1][1] and "| `stop.env_frames` | `1000` | `5000` |" in texts[1][1]
    assert _session_hparams(tmp_path / "tb" / "hparams")["ppo.lr"] == 0.002  # the one session, written once
    summary = _events(tmp_path / "tb" / "hparams")
    assert len(summary.Tensors("_hparams_/session_start_info")) == 1
    assert _last(summary.Scalars("hparams/return_mean_best")).value == 50.0  # 45 and 48 did not beat the first run
    assert _last(summary.Scalars("hparams/return_mean")).value == 48.0
    assert sorted((s.step, s.value) for s in summary.Scalars("hparams/eval_return_mean_best")) == [(100, 40.0),
                                                                                                   (200, 60.0)]


def test_a_multilogger_starts_the_loggers_that_can_and_contains_a_failing_start(tmp_path):
    class Starting(RecordingLogger):
        def start(self, run):
            self.started = run

    class FailingStart(RecordingLogger):
        def start(self, run):
            raise RuntimeError("no network")

    starting, failing, plain = Starting(), FailingStart(), RecordingLogger()
    multi = MultiLogger(starting, failing, plain)
    with pytest.warns(RuntimeWarning, match="FailingStart failed and is disabled.*no network"):
        multi.start(_run_start(tmp_path))
    multi.write({"a": 1.0}, step=1)
    assert starting.started.name == "cartpole-ppo-1" and multi.active == (starting, plain)


def test_wandb_logger_opens_in_start_logs_numbers_at_the_step_and_keeps_its_run_id(tmp_path, monkeypatch):
    import sys
    import types

    from menger.logging.wandb import WandbLogger

    calls = []
    run = types.SimpleNamespace(log=lambda data, step: calls.append((data, step)), finish=lambda: calls.append("end"))
    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls.append(kwargs) or run
    monkeypatch.setitem(sys.modules, "wandb", fake)

    logger = WandbLogger("proj", entity="team", group="seeds")
    assert isinstance(logger, Logger)
    with pytest.raises(ValueError, match="before start"):
        logger.write({"a": 1.0}, step=1)
    logger.start(_run_start(tmp_path))
    logger.write({"learner/loss": float("nan"), "learner/updates": 3, "flag": True, "note": "x"}, step=64)
    logger.close()
    logger.close()
    init, (data, step), end = calls
    assert init["entity"] == "team" and init["group"] == "seeds"
    assert init["config"] == {"algo": "ppo", "ppo": {"lr": 0.002}}
    assert step == 64 and set(data) == {"learner/loss", "learner/updates"} and math.isnan(data["learner/loss"])
    assert end == "end"
    assert (tmp_path / "wandb_run_id").read_text().strip() == init["id"]
    run.step = 65  # a resumed W&B run has seen steps up to 64
    resumed = WandbLogger("proj")
    resumed.start(_run_start(tmp_path, resumed=True))
    assert calls[-1]["id"] == init["id"]
    resumed.write({"learner/updates": 2}, step=32)  # before the point the run had reached: W&B would refuse it
    resumed.write({"learner/updates": 4}, step=96)
    assert calls[-1] == ({"learner/updates": 4}, 96)


def test_a_summary_that_cannot_be_read_back_costs_the_best_not_the_scalars(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing import event_accumulator

    with TensorBoardLogger(tmp_path / "tb") as logger:
        logger.start(_run_start(tmp_path))
        logger.write({"episode/return_mean": 50.0}, step=100)

    def damaged(self):
        raise OSError("damaged events file")

    monkeypatch.setattr(event_accumulator.EventAccumulator, "Reload", damaged)
    with TensorBoardLogger(tmp_path / "tb") as logger, pytest.warns(RuntimeWarning, match="damaged events file"):
        logger.start(_run_start(tmp_path, step=100, resumed=True))
        logger.write({"episode/return_mean": 20.0}, step=200)
    monkeypatch.undo()
    scalars = _events(tmp_path / "tb").Scalars("episode/return_mean")  # two events files, read in either order
    assert sorted((s.step, s.value) for s in scalars) == [(100, 50.0), (200, 20.0)]
    summary = _events(tmp_path / "tb" / "hparams")
    assert len(summary.Tensors("_hparams_/session_start_info")) == 1  # not written a second time
