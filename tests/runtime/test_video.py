"""Videos of the env's own rendering (`menger eval --video`, eval.video_interval_s) and the periodic deterministic
evaluation during training (eval.interval_s) of on-policy runs."""
import json

import imageio.v2 as imageio
import numpy as np
import pytest

from menger import api
from menger.cli import main
from menger.envs.render import RenderError, make_render_env, record_episode
from menger.logging.video import VideoWriter
from menger.runtime.evaluation import record_video

USER_CARTPOLE = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
TINY = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2", "runtime.unroll_length=8",
        "stop.target_return=null", "runtime.learner.device=cpu", "runtime.learner.threads=1"]


def _decoded(path) -> list[np.ndarray]:
    with imageio.get_reader(path) as reader:
        return [np.asarray(frame) for frame in reader]


def _left(obs):
    return np.zeros(len(obs), np.int64)


class _Frames:
    def __init__(self):
        self.frames = []

    def append(self, frame):
        self.frames.append(frame)


# ----- the writer -------------------------------------------------------------------------------------------

def test_an_mp4_keeps_the_frame_size_and_an_odd_one_gets_one_black_row(tmp_path):
    frames = [np.full((7, 10, 3), 40 * i, np.uint8) for i in range(5)]
    with VideoWriter(tmp_path / "odd.mp4", fps=10) as video:
        for frame in frames:
            video.append(frame)
    decoded = _decoded(tmp_path / "odd.mp4")
    assert len(decoded) == 5 and decoded[0].shape == (8, 10, 3)
    assert abs(int(decoded[3][:7].mean()) - 120) <= 3 and decoded[3][7].max() <= 20


def test_a_gif_on_request_and_frames_of_another_size_are_refused(tmp_path):
    with VideoWriter(tmp_path / "v.gif", fps=20) as video:
        video.append(np.zeros((6, 4, 3), np.uint8))
        video.append(np.full((6, 4), 255, np.uint8))  # grey is made rgb
    assert [frame.shape[:2] for frame in _decoded(tmp_path / "v.gif")] == [(6, 4), (6, 4)]
    with pytest.raises(ValueError, match="must all have one size"):
        with VideoWriter(tmp_path / "bad.mp4", fps=20) as video:
            video.append(np.zeros((6, 4, 3), np.uint8))
            video.append(np.zeros((8, 4, 3), np.uint8))
    assert not (tmp_path / "bad.mp4").exists()  # no half-written video left behind
    with pytest.raises(ValueError, match="not one of"):
        VideoWriter(tmp_path / "v.avi", fps=20)


# ----- rendering envs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id", ["CartPole-v1", USER_CARTPOLE])
def test_a_gym_id_and_a_user_class_render_their_own_picture_into_an_mp4(tmp_path, env_id):
    env = make_render_env(env_id, seed=3)
    try:
        record = record_video(env, _left, tmp_path / "cartpole.mp4", seed=3, max_steps=500)
    finally:
        env.close()
    frames = _decoded(record.path)
    assert record.length > 5 and record.frames == record.length + 1 == len(frames)  # the start, then every step
    assert frames[0].shape == (400, 600, 3) and (record.width, record.height, record.fps) == (600, 400, 50)
    assert record.episode_return == record.length  # CartPole pays 1 a step
    assert not np.array_equal(frames[0], frames[-1])  # the pole moved


def test_the_atari_preset_films_the_full_colour_screen_while_the_agent_sees_its_84x84_frames():
    env = make_render_env("ALE/Pong-v5", seed=0, preset="atari")
    try:
        seen = []
        sink = _Frames()
        record = record_episode(env, lambda obs: seen.append(obs.shape) or np.zeros(1, np.int64), sink, seed=0,
                                max_steps=12)
    finally:
        env.close()
    assert seen[0] == (1, 4, 84, 84) and record.frames == 13 and env.fps == 15  # 60 frames/s, 4 skipped
    assert sink.frames[-1].shape == (210, 160, 3) and sink.frames[-1].dtype == np.uint8
    assert len(np.unique(sink.frames[-1].reshape(-1, 3), axis=0)) >= 3  # colour: background, paddles, score


def test_an_env_that_cannot_render_says_what_why_and_what_to_do():
    with pytest.raises(RenderError) as caught:
        make_render_env("menger/Bandit-v0", seed=0, instead="run menger eval without --video")
    message = str(caught.value)
    assert "'menger/Bandit-v0' cannot render rgb_array frames" in message
    assert "render_mode" in message and "[H, W, 3] uint8" in message and message.endswith("without --video")


USER_ENVS = """
import gymnasium as gym
import numpy as np


class Blind(gym.Env):  # no render_mode argument, no render()
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 1.0, True, False, {}


class Painter(Blind):  # takes no render_mode, but renders rgb_array by itself: odd-sized frames
    render_mode = "rgb_array"

    def render(self):
        return np.full((5, 7, 3), 200, np.uint8)
"""


def test_a_user_class_without_render_mode_fails_clearly_or_films_if_it_renders_by_itself(tmp_path, monkeypatch):
    (tmp_path / "my_envs.py").write_text(USER_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RenderError, match="'my_envs:Blind' cannot render.*takes no render_mode argument"):
        make_render_env("my_envs:Blind", seed=0)
    env = make_render_env("my_envs:Painter", seed=0)
    try:
        record = record_video(env, _left, tmp_path / "p.mp4", seed=0, max_steps=10)
    finally:
        env.close()
    assert (record.width, record.height, record.frames, record.episode_return) == (7, 5, 2, 1.0)
    assert _decoded(record.path)[0].shape == (6, 8, 3)  # H.264 needs even sides: one black row and column


# ----- `menger eval --video` --------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id,allow", [("CartPole-v1", []), (USER_CARTPOLE, ["--allow-import", "gymnasium"])])
def test_menger_eval_video_writes_an_mp4_and_says_where(tmp_path, quiet, capsys, env_id, allow):
    run = api.train("cartpole-ppo", [*quiet, *TINY, f"env.id={env_id}", "stop.env_frames=32"],
                    run_dir=str(tmp_path / "run")).run_dir
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "1", "--video", *allow]) == 0
    out = capsys.readouterr().out
    assert f"video: {run / 'eval.mp4'} (600x400, " in out
    frames = _decoded(run / "eval.mp4")
    assert len(frames) >= 2 and frames[0].shape == (400, 600, 3)


def test_menger_eval_video_of_an_env_that_cannot_render_fails_with_the_message(tmp_path, quiet, capsys):
    run = api.train("cartpole-ppo", [*quiet, *TINY, "env.id=menger/Bandit-v0", "stop.env_frames=32"],
                    run_dir=str(tmp_path / "run")).run_dir
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "1", "--video"]) == 1
    captured = capsys.readouterr()
    assert "cannot render rgb_array frames" in captured.err and "without --video" in captured.err
    assert "mean return" not in captured.out and not list(run.glob("eval.*"))


# ----- during training --------------------------------------------------------------------------------------

@pytest.mark.parametrize("launcher", ["threads", "processes"])
def test_training_evaluates_deterministically_and_films_an_episode(tmp_path, launcher):
    run = tmp_path / "run"
    interval_s = 0.25
    settings = [f"runtime.launcher={launcher}", "stop.env_frames=null", "stop.wall_clock_s=1.5",
                f"eval.interval_s={interval_s}", "eval.episodes=2", "eval.max_steps=500", "eval.video_interval_s=0.001"]
    result = api.train("cartpole-ppo", ["log.progress=false", *TINY, *settings], run_dir=str(run))
    m = result.final_metrics
    assert m["eval/episodes"] == 2 and np.isfinite(m["eval/return_mean"]) and m["eval/length_mean"] >= 1
    assert 1 <= m["eval/count"] <= m["time/wall_s"] / interval_s + 1  # one evaluation per interval at most
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/return_mean" in record for record in records)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(run / "tb")).Reload().Tags()
    assert {"eval/return_mean", "eval/length_mean"} <= set(tags["scalars"]) and "eval/video" in tags["images"]
    videos = sorted((run / "videos").glob("eval-*.mp4"))
    assert m["eval/videos"] == len(videos) >= 1
    assert _decoded(videos[0])[0].shape == (400, 600, 3)


def test_the_evaluator_runs_at_most_once_per_interval_of_training_time():
    from menger.envs import make_vec_env
    from menger.experiment import load_experiment
    from menger.models import build_policy
    from menger.runtime.evaluation import Evaluator

    config = load_experiment("cartpole-ppo", ["eval.interval_s=2", "eval.episodes=2", "eval.max_steps=50"])
    probe = make_vec_env("CartPole-v1", 1, seed=0)
    spaces = (probe.single_observation_space, probe.single_action_space)
    probe.close()
    evaluator = Evaluator(config, *spaces)
    try:
        assert not evaluator.due(1.9) and evaluator.due(2.0)
        stats = evaluator.run(build_policy(*spaces, config.model, config.algo), elapsed_s=2.7)
        assert stats["eval/count"] == 1 and not evaluator.due(4.6) and evaluator.due(4.7)
    finally:
        evaluator.close()


def test_a_training_video_of_an_env_that_cannot_render_stops_the_run_before_it_starts(tmp_path, quiet):
    with pytest.raises(RenderError, match="set eval.video_interval_s=0"):
        api.train("cartpole-ppo", [*quiet, *TINY, "env.id=menger/Bandit-v0", "stop.env_frames=32",
                                   "eval.video_interval_s=60"], run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("preset,reads_eval", [("cartpole-ppo", False), ("cartpole-apex", True)])
def test_an_evaluation_switched_on_for_ppo_is_watched_but_its_target_reads_the_training_episodes(tmp_path, preset,
                                                                                                   reads_eval):
    from menger.experiment import load_experiment
    from menger.runtime import Trainer

    trainer = Trainer(load_experiment(preset, ["eval.interval_s=1"]), tmp_path / "run", launcher=None)
    assert trainer.stop_rules.use_eval is reads_eval


def test_a_video_goes_into_tensorboard_as_a_smaller_animated_gif(tmp_path):
    import io

    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from menger.logging import TensorBoardLogger

    with VideoWriter(tmp_path / "v.mp4", fps=50) as video:
        for i in range(12):
            video.append(np.full((400, 600, 3), 20 * i, np.uint8))
    with TensorBoardLogger(tmp_path / "tb") as logger:
        logger.write_video("eval/video", tmp_path / "v.mp4", step=7, max_frames=6)
    (image,) = EventAccumulator(str(tmp_path / "tb")).Reload().Images("eval/video")
    gif = Image.open(io.BytesIO(image.encoded_image_string))
    assert image.step == 7 and (image.width, image.height) == (300, 200) == gif.size
    assert gif.format == "GIF" and gif.n_frames == 6 and gif.info["duration"] == 40  # every 2nd frame of 50 fps


def test_the_render_env_is_wrapped_as_the_actors_envs_are(tmp_path):
    """A video is filmed through env.wrappers: a TimeLimit of 7 steps ends the filmed episode at 7."""
    wrappers = [{"class": "gymnasium.wrappers:TimeLimit", "max_episode_steps": 7}]
    env = make_render_env("CartPole-v1", seed=3, wrappers=wrappers)
    try:
        record = record_episode(env, _left, _Frames(), seed=3, max_steps=500)
    finally:
        env.close()
    unwrapped = make_render_env("CartPole-v1", seed=3)
    try:
        plain = record_episode(unwrapped, _left, _Frames(), seed=3, max_steps=500)
    finally:
        unwrapped.close()
    assert record.length == 7 < plain.length


def test_an_evaluator_by_frames_runs_on_an_even_grid_of_frames_whatever_the_clock_says(tmp_path, quiet):
    from menger import api
    from menger.envs import make_vec_env
    from menger.experiment import load_experiment
    from menger.models import build_policy
    from menger.runtime.evaluation import Evaluator

    config = load_experiment("cartpole-ppo", ["eval.interval_frames=1000", "eval.episodes=2", "eval.max_steps=50"])
    assert config.evaluates
    probe = make_vec_env("CartPole-v1", 1, seed=0)
    spaces = (probe.single_observation_space, probe.single_action_space)
    probe.close()
    evaluator = Evaluator(config, *spaces)
    try:
        assert not evaluator.due(1e6, 999) and evaluator.due(0.0, 1000)
        evaluator.run(build_policy(*spaces, config.model, config.algo), elapsed_s=0.0, frames=2500)
        assert not evaluator.due(1e6, 2999) and evaluator.due(0.0, 3000)  # the next multiple, not 2500 + 1000
    finally:
        evaluator.close()
    run = api.train("ppo", overrides=[*quiet, "runtime.launcher=threads", "stop.env_frames=8192",
                                      "eval.interval_frames=2048", "eval.episodes=2"], run_dir=str(tmp_path / "run"))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evaluated = [row["step"] for row in rows if "eval/return_mean" in row]
    assert run.final_metrics["eval/count"] >= 3 and len(set(evaluated)) >= 3  # one per 2,048 frames, not per second
