"""What this install and this machine provide: the optional packages (extras) and the platform.

The core install (`pip install menger-rl`) trains on one Linux machine; every other package comes with an extra,
and is imported only where it is used, through `require`:

    imageio = require("imageio.v2", "video", "`menger eval --video`")   # the module, or MissingExtraError:
    # `menger eval --video` needs imageio, which is not installed: pip install "menger-rl[video]", or ...

`EXTRAS` says which top-level modules each extra provides (a test holds it to pyproject.toml's extras);
`missing_extra` turns the failed import of a user's or a library's module (an env id 'package.module:Name')
that needs one of them into the same error.
`require_linux` refuses, with the reason, a command that forks actors on a platform that cannot run them.
"""
from __future__ import annotations

import importlib
import os
import platform
import sys
from types import ModuleType

# extra -> the top-level modules it installs (pyproject.toml, [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "atari": ("ale_py",),
    "games": ("pygame",),  # PettingZoo's classic games (Connect Four) import pygame, to draw themselves
    "plot": ("matplotlib",),
    "video": ("pygame", "imageio", "imageio_ffmpeg"),
    "tune": ("optuna",),
    "ray": ("ray",),
    "export": ("onnx", "onnxruntime"),
    "wandb": ("wandb",),
    "suites": ("Box2D", "mujoco", "minatar"),
    "openspiel": ("pyspiel",),  # the openspiel:mcts opponent of menger match
}
UNSUPPORTED_PLATFORM_OK = "MENGER_ALLOW_UNSUPPORTED_PLATFORM"  # =1: try anyway (nothing is promised)


class MissingExtraError(ImportError):
    """An optional package is not installed; the message names the extra that installs it and what needed it."""

    def __init__(self, module: str, extra: str, purpose: str, instead: str | None = None):
        self.extra, self.purpose = extra, purpose
        package = module.split(".")[0]
        super().__init__(f"{purpose} needs {package}, which is not installed: {install_hint(extra)}"
                         + (f"; or {instead}" if instead else ""), name=package)


class UnsupportedPlatformError(RuntimeError):
    """A command that needs Linux (forked actors, fcntl locks, /dev/shm) was started elsewhere."""


def install_hint(extra: str) -> str:
    """The command that installs `extra`, from an index and from a checkout."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {sorted(EXTRAS)}")
    return f'pip install "menger-rl[{extra}]", or from a checkout pip install -e ".[{extra}]"'


def require(module: str, extra: str, purpose: str, instead: str | None = None) -> ModuleType:
    """`module` imported, or MissingExtraError naming `extra`, `purpose` (what needs it, e.g. "`menger plot`") and
    what to do `instead` (e.g. "use --launcher processes") when it (or its top-level package) is not installed.
    Any other failure of an installed package's import is raised as it is: a broken install, not a missing extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if not _is_absent(exc, module):
            raise
        raise MissingExtraError(module, extra, purpose, instead) from exc


def missing_extra(exc: BaseException, purpose: str) -> MissingExtraError | None:
    """The MissingExtraError to raise when `exc` is the import of a module one of `EXTRAS` provides failing (the
    first extra that lists it: pygame's is games, which envs need; `require` names video where a video needs
    it); None for any other error."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = next((name for name, modules in EXTRAS.items() if top in modules), None)
    return None if extra is None else MissingExtraError(top, extra, purpose)


def _is_absent(exc: ImportError, module: str) -> bool:
    """The import failed because `module` itself (or a package above it) is missing, or blocked
    (sys.modules[name] = None), not because something it imports is."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return False
    parts = module.split(".")
    return exc.name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def require_linux(command: str) -> None:
    """Refuse `command` (e.g. "menger train") off Linux, saying what it needs that the platform lacks; the
    environment variable MENGER_ALLOW_UNSUPPORTED_PLATFORM=1 lets it try anyway."""
    if sys.platform.startswith("linux") or os.environ.get(UNSUPPORTED_PLATFORM_OK, "") == "1":
        return
    system = platform.system() or sys.platform
    raise UnsupportedPlatformError(
        f"{command} runs on Linux, and this is {system}: Menger forks its actors and learner ranks (the 'fork' start "
        "method, which Windows lacks and macOS makes unsafe), locks each run directory with fcntl.flock (not on "
        "Windows) and keeps unroll slots and parameters in shared memory (/dev/shm). Use a Linux machine, a Linux "
        "container (docker run --shm-size=8g ...), or WSL 2 on Windows; or set "
        f"{UNSUPPORTED_PLATFORM_OK}=1 to try anyway")
