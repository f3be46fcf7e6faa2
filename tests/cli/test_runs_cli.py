"""`menger train` shortcuts (--env, --algo, --frames), --seeds, `menger presets`' layout, shell completion."""
import argparse
import json
import shutil
import subprocess

import pytest

from menger.cli import _frames, _parser, _train_experiment, format_presets, main
from menger.cli.seeds import format_summary, summarize
from menger.config import ConfigError
from menger.experiment import list_presets
from menger.experiment.presets import summary
from menger.logging import JsonlLogger


def _train_args(*argv):
    return _parser().parse_args(["train", *argv])


@pytest.mark.parametrize("text,frames", [("200000", 200_000), ("200_000", 200_000), ("2e5", 200_000),
                                         ("200k", 200_000), ("1.5M", 1_500_000), ("1m", 1_000_000)])
def test_frames_take_the_usual_forms(text, frames):
    assert _frames(text) == frames


@pytest.mark.parametrize("text", ["0", "1.5", "-3k", "lots", "1e-4k", ""])
def test_frames_refuse_what_is_not_a_whole_positive_number(text):
    with pytest.raises(argparse.ArgumentTypeError, match="whole number of frames"):
        _frames(text)


def test_algo_env_and_frames_pick_the_generic_preset_and_set_their_keys():
    config = _train_experiment(_train_args("--algo", "ppo", "--env", "Acrobot-v1", "--frames", "50k"))
    assert (config.name, config.algo, config.env.id, config.stop.env_frames) == ("ppo", "ppo", "Acrobot-v1", 50_000)
    assert _train_experiment(_train_args("cartpole-ppo", "--algo", "ppo")).name == "cartpole-ppo"
    # the flag wins over a --set of the same key
    assert _train_experiment(_train_args("cartpole-ppo", "--set", "env.id=Foo-v0", "--env", "Acrobot-v1")).env.id == \
        "Acrobot-v1"


def test_algo_errors_say_what_to_do():
    with pytest.raises(ConfigError, match="cartpole-ppo trains with ppo; leave --algo out"):
        _train_experiment(_train_args("cartpole-ppo", "--algo", "sac"))
    with pytest.raises(ConfigError, match="gorila has no generic preset.*menger train cartpole-gorila --env ID"):
        _train_experiment(_train_args("--algo", "gorila"))
    with pytest.raises(ConfigError, match="unknown algorithm 'ppp'; did you mean 'ppo'"):
        _train_experiment(_train_args("--algo", "ppp"))
    with pytest.raises(ConfigError, match="name an experiment.*--algo ppo --env Acrobot-v1"):
        _train_experiment(_train_args())


def test_no_experiment_is_a_config_error_before_anything(tmp_path, capsys):
    assert main(["train", "--run-dir", str(tmp_path / "r")]) == 2
    assert "name an experiment" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_seed_and_seeds_exclude_each_other_and_parallel_needs_seeds(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["train", "cartpole-ppo", "--seed", "1", "--seeds", "1", "2"])
    assert done.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--parallel N goes with --seeds"):
        main(["train", "cartpole-ppo", "--parallel", "2", "--run-dir", str(tmp_path / "r")])
    with pytest.raises(SystemExit, match="a seed is given twice"):
        main(["train", "cartpole-ppo", "--seeds", "1", "1", "--run-dir", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()


def test_each_seed_gets_the_whole_command_line_but_its_seed_and_run_dir():
    from menger.cli import _forwarded_train_argv

    argv = ["cartpole-ppo", "--set", "a=1", "--set", "b=2", "--frames", "1M", "--no-progress", "--supervise",
            "--actors", "auto", "--seeds", "1", "2", "--parallel", "2", "--run-dir", "x"]
    args = _train_args(*argv)
    forwarded = _forwarded_train_argv(args)
    again = _train_args(*forwarded)
    assert "--seeds" not in forwarded and "--run-dir" not in forwarded and "--parallel" not in forwarded
    for key in ("experiment", "overrides", "frames", "no_progress", "supervise", "actors", "algorithm", "env"):
        assert getattr(again, key) == getattr(args, key), key


def _fake_run(run_dir, returns, evals=None):
    with JsonlLogger(run_dir / "metrics.jsonl") as logger:
        for index, value in enumerate(returns):
            metrics = {"episode/return_mean": value}
            if evals:
                metrics["eval/return_mean"] = evals[index]
            logger.write(metrics, 1000 * (index + 1))


def test_the_seed_summary_averages_the_finished_seeds(tmp_path):
    _fake_run(tmp_path / "seed-1", [10.0, 100.0])
    _fake_run(tmp_path / "seed-2", [20.0, 200.0], evals=[1.0, 2.0])
    _fake_run(tmp_path / "seed-3", [5.0])  # failed: left out of the mean
    result = summarize(tmp_path, [1, 2, 3, 4], {1: 0, 2: 0, 3: 1})
    rows = {row["seed"]: row for row in result["seeds"]}
    assert rows[1]["return"] == 100.0 and rows[2]["eval_return"] == 2.0 and rows[1]["frames"] == 2000
    assert rows[4] == {"seed": 4, "run_dir": str(tmp_path / "seed-4"), "exit_code": None, "frames": None,
                       "return": None, "eval_return": None}
    assert result["summary"]["return"]["mean"] == 150.0 and result["summary"]["return"]["seeds"] == 2
    low, high = result["summary"]["return"]["ci95"]
    assert 100.0 <= low < 150.0 < high <= 200.0
    text = format_summary(result)
    assert "return: mean 150 over 2 seeds, 95 % bootstrap interval of the mean [100, 200]" in text
    json.dumps(result)  # what seeds.json holds


@pytest.mark.slow
def test_seeds_train_one_run_each_under_one_parent_with_a_summary_and_a_plot(tmp_path):
    import sys

    parent = tmp_path / "runs"
    out = subprocess.run([sys.executable, "-m", "menger.cli", "train", "cartpole-ppo", "--seeds", "1", "2",
                          "--frames", "2048", "--launcher", "threads", "--run-dir", str(parent), "--no-progress",
                          "--set", "log.tensorboard=false", "--set", "log.interval_s=0.05"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads((parent / "seeds.json").read_text())
    assert [row["seed"] for row in summary["seeds"]] == [1, 2]
    assert all(row["exit_code"] == 0 and row["frames"] >= 2048 for row in summary["seeds"])
    assert summary["summary"]["return"]["seeds"] == 2 and "95 % bootstrap interval" in out.stdout
    assert (parent / "plot.png").exists() and (parent / "seed-1" / "system.json").exists()
    from menger.api import load_run_config

    assert [load_run_config(parent / f"seed-{k}").runtime.seed for k in (1, 2)] == [1, 2]


def test_a_summary_is_a_whole_phrase_of_the_opening_comment():
    assert summary(["One line"]) == "One line"
    assert summary(["Ends a sentence.", "More"]) == "Ends a sentence."
    assert summary(["Ends a clause;", "more"]) == "Ends a clause"
    assert summary(["Breaks off in a", "phrase; then more"]) == "Breaks off in a phrase"
    assert summary(["Alpha (a; b, c", "d) beta: gamma"]) == "Alpha (a; b, c d) beta"  # not inside brackets
    long = ["Name: a list that goes on,", " ".join(["and on"] * 60) + "."]
    assert summary(long) == "Name"  # too long: back to the phrase the first line ends


def test_presets_are_laid_out_to_the_longest_name_and_wrapped_whole():
    presets = list_presets()
    longest = max(map(len, presets))
    assert longest > 18  # the names that used to push their summaries out of line
    lines = format_presets(presets).splitlines()
    assert len(lines) == len(presets) and {line.index(summary_) for line, summary_ in
                                           zip(lines, presets.values())} == {longest + 2}
    wrapped = format_presets(presets, width=80).splitlines()
    assert all(len(line) <= 80 or " " not in line[longest + 2:] for line in wrapped)
    text = " ".join(line[longest + 2:].strip() for line in wrapped)
    assert all(summary_ in text for summary_ in presets.values())  # nothing cut


def test_completion_scripts_complete_commands_options_choices_and_presets(capsys):
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert "bashcompinit" in zsh and "complete -o filenames -F _menger menger" in zsh
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    if shutil.which("bash") is None:
        pytest.skip("no bash to run the script in")

    def complete(*words):
        probe = (f'{script}\nCOMP_WORDS=({" ".join(words)}); COMP_CWORD={len(words) - 1}; _menger; '
                 'printf "%s\\n" "${COMPREPLY[@]}"')
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()

    assert complete("menger", "tr") == ["train"]
    assert complete("menger", "train", "cartpole-pp") == ["cartpole-ppo"]
    assert complete("menger", "train", "--se") == ["--set", "--seed", "--seeds"]
    assert complete("menger", "train", "--launcher", "") == ["threads", "processes", "ray"]
    assert complete("menger", "--debug", "completion", "") == ["bash", "zsh"]
    assert "--band" in complete("menger", "plot", "--")
