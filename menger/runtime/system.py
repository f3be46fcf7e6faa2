"""`RUN_DIR/system.json`: what ran, where and how, written when a run starts (and again at each resume).

    {"packages": {"menger": "0.1.0", "torch": "2.13.0", "numpy": ..., "gymnasium": ..., ...},
     "python": "3.12.3", "platform": "Linux-6.8...", "machine": {"cpus": 16, "memory_bytes": ...},
     "git": {"sha": "f57a461...", "dirty": false},           # null when the source is not a git checkout
     "command": ["menger", "train", "cartpole-ppo"], "cwd": ..., "time": ..., "resume": false,
     "previous": [...]}                                      # the records of earlier starts, oldest first

The newest start is at the top level (`jq .packages.menger RUN/system.json`); a resume moves the record it
replaces into `previous`, so the history of a run's starts is kept. Nothing here may fail a run: a package that
is not installed is left out, a missing `git` gives `"git": null`.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SYSTEM_FILE = "system.json"
REQUIRED = ("menger-rl", "torch", "numpy", "gymnasium", "pettingzoo", "pyyaml")
OPTIONAL = ("ale-py", "opencv-python", "pygame", "imageio", "imageio-ffmpeg", "matplotlib", "tensorboard", "optuna",
            "ray", "onnx", "onnxruntime", "wandb", "shimmy")


def package_versions(names=REQUIRED + OPTIONAL) -> dict[str, str]:
    """Installed distributions' versions (menger-rl as "menger"); a source tree never installed reports menger's
    `__version__`; absent optional packages are left out."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found["menger" if name == "menger-rl" else name] = version(name)
        except PackageNotFoundError:
            if name == "menger-rl":
                import menger

                found["menger"] = getattr(menger, "__version__", "unknown")
    return found


def git_state(folder: Path, tracked: str | None = None) -> dict | None:
    """The commit of the git checkout holding `folder` and whether it has uncommitted changes (to tracked files);
    None where there is no checkout, no git, or `tracked` (a path under `folder`) is not a file of that checkout
    (an installed Menger inside a virtual environment that happens to lie in someone's repository)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if not sha or (tracked is not None and git("ls-files", "--error-unmatch", tracked) is None):
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


def machine() -> dict:
    """The cores this process may use and the machine's memory (None where the OS does not say)."""
    cpus: int | None
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = None
    return {"cpus": cpus, "cpus_on_machine": os.cpu_count(), "memory_bytes": memory}


def system_record(resume: bool = False, argv: list[str] | None = None) -> dict:
    """This start's record (module doc). `git`: Menger's own source checkout; `cwd_git`: the checkout the command
    ran in (the user's project), when it is another one."""
    command = list(sys.argv if argv is None else argv)
    if command and command[0].endswith(("menger/cli/__main__.py", "/menger")):
        command[0] = "menger"
    source = Path(__file__).resolve().parents[2]
    menger_git = git_state(source, tracked="menger/runtime/system.py")
    cwd_git = git_state(Path.cwd())
    return {"packages": package_versions(), "python": platform.python_version(), "platform": platform.platform(),
            "machine": machine(), "git": menger_git, "cwd_git": cwd_git if cwd_git != menger_git else None,
            "command": command, "cwd": os.getcwd(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "resume": resume}


def write_system_file(run_dir: str | Path, resume: bool = False, argv: list[str] | None = None) -> Path:
    """Write `RUN_DIR/system.json` for this start, keeping earlier starts' records in `previous`."""
    path = Path(run_dir) / SYSTEM_FILE
    record = system_record(resume, argv)
    try:
        earlier = json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict):
        previous = earlier.pop("previous", [])
        record["previous"] = [*(previous if isinstance(previous, list) else []), earlier]
    partial = path.with_name(f".{SYSTEM_FILE}.partial")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(partial, path)
    return path
