"""What a failed command says: what failed, the likely cause, what to try; the traceback goes to a file.

    explanation = explain(exc, "train")   # what failed (one line), where (file:line), hints (cause, what to try)
    print(explanation.message())          # the few lines `menger` prints instead of a traceback
    write_error_file(run_dir, exc)        # RUN_DIR/error.txt: that message, then every traceback

Menger's own errors (any exception class defined in a `menger` module) already say what is wrong and what to
do, so their text is kept as it is. Errors from user code, torch or the system get a hint from `HINTS`: the
first rule whose exception name and text match. An error that happened in a child (an actor process, a Ray
actor, a learner rank) reaches the learner as text with the child's traceback; `NoActorsError` and
`TrainingFailed` carry those (`child_errors`), so the hint and the place are the child's own.
"""
from __future__ import annotations

import re
import sys
import sysconfig
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from menger.envs import UnknownEnvError
from menger.extras import EXTRAS, install_hint
from menger.runtime.spaces import NetworkBuildError

ERROR_FILE = "error.txt"

_SHAPE = re.compile(r"shapes cannot be multiplied|size mismatch|must match the size of tensor|"
                    r"is invalid for input of size|Expected input batch_size|expected input\[|"
                    r"Given groups=|expected .*to have .* channels|Expected .*dimensional input|"
                    r"mat1 and mat2|cannot broadcast|operands could not be broadcast", re.IGNORECASE)
_MEMORY = re.compile(r"out of memory|can't allocate memory|Cannot allocate memory|std::bad_alloc", re.IGNORECASE)
_NO_SPACE = re.compile(r"No space left on device", re.IGNORECASE)
_NO_RAY = re.compile(r"No module named '?ray(\.|'|$)")
_NO_MODULE = re.compile(r"No module named '([^']+)'")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.MULTILINE)

SHRINK = ("shrink what is held at once: runtime.envs_per_actor, runtime.unroll_length, runtime.actors, "
          "replay.max_size or the batch size (replay.batch_size, ppo.minibatches up), or use a smaller network")
NETWORK_CONTRACT = ("a custom network is built as Class(obs_space, action_space, **model.kwargs) and its forward(obs) "
                    "takes a batch [N, *obs_shape] and returns (logits [N, A], value [N]) (docs/architecture.md, "
                    "'Extending')")


@dataclass(frozen=True)
class Hint:
    """A rule: errors whose type name is one of `types` (empty: any) and whose text matches `pattern`."""

    types: tuple[str, ...]
    pattern: re.Pattern | None
    cause: str
    fix: str

    def matches(self, type_name: str, text: str) -> bool:
        if self.types and type_name not in self.types:
            return False
        return self.pattern is None or self.pattern.search(f"{type_name}: {text}") is not None


HINTS = (
    Hint(("ModuleNotFoundError", "ImportError"), _NO_RAY, "Ray is an optional extra and is not installed here",
         f"{install_hint('ray')}, or use --launcher processes"),
    *(Hint(("ModuleNotFoundError", "ImportError"), re.compile(rf"No module named '?({'|'.join(modules)})(\.|'|$)"),
           f"{', '.join(modules)} come{'s' if len(modules) == 1 else ''} with the optional extra [{extra}], which "
           "is not installed here", install_hint(extra)) for extra, modules in EXTRAS.items() if extra != "ray"),
    Hint(("ModuleNotFoundError", "ImportError"), None,
         "a module this run imports (an env or network given as 'package.module:Name', or a library it needs) "
         "cannot be imported by this Python",
         f"install its package into {sys.executable} (pip install -e YOUR_PROJECT), or put the folder that holds it "
         "on PYTHONPATH (PYTHONPATH=. menger ...); check the spelling of 'package.module:Name'"),
    Hint(("OutOfMemoryError", "MemoryError"), None, "the machine (or the GPU) ran out of memory",
         SHRINK),
    Hint((), _MEMORY, "the machine (or the GPU) ran out of memory",
         SHRINK),
    Hint((), re.compile(r"exit code -9\b"), "the process was killed by SIGKILL, most often by the kernel's "
         "out-of-memory killer", f"dmesg | tail says whether it was; {SHRINK}"),
    Hint((), _NO_SPACE, "a disk or the shared memory (/dev/shm, where unroll slots and parameters live) is full",
         "free space (df -h . /dev/shm); in docker give --shm-size=8g; or shrink runtime.envs_per_actor, "
         "runtime.unroll_length, replay.max_size"),
    Hint((), _SHAPE, "a tensor's shape does not fit a layer: the network and the env's observations or actions "
         "disagree", f"check the env's spaces (menger config EXP shows env.id and model); {NETWORK_CONTRACT}"),
)


def _hint(type_name: str, text: str) -> Hint | None:
    return next((hint for hint in HINTS if hint.matches(type_name, text)), None)


def _hint_for(exc: BaseException) -> Hint | None:
    text = str(exc)
    if isinstance(exc, ImportError) and exc.name:  # "import of ray halted" and the like name the module too
        text = f"No module named '{exc.name}': {text}"
    return _hint(type(exc).__name__, text)


_MESSAGES = (RuntimeError, ValueError, OSError)  # what Menger raises with a message meant for the user


def _is_menger_error(exc: BaseException) -> bool:
    """One of Menger's own errors (its class is Menger's), or a message Menger raised itself (a RuntimeError,
    ValueError or OSError whose raising frame is Menger's): its text is meant for the user. A TypeError or a
    KeyError inside Menger is a bug, not a message."""
    module = type(exc).__module__ or ""
    if module == "menger" or module.startswith("menger."):
        return True
    frames = _frames_of(exc)
    return isinstance(exc, _MESSAGES) and bool(frames) and frames[-1][0].startswith(_MENGER_DIR)


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost explicit cause (`raise ... from exc`): the error as the user's code or torch raised it."""
    seen = set()
    while exc.__cause__ is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__
    return exc


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})
_MENGER_DIR = str(Path(__file__).resolve().parent)


def _is_user_file(path: str) -> bool:
    """Code that is neither Python's, nor an installed library's, nor Menger's: the user's own."""
    return not path.startswith(_LIBRARY_DIRS) and not path.startswith(_MENGER_DIR) and not path.startswith("<")


def _place(frames: list[tuple[str, int, str]]) -> str | None:
    """Where an error comes from: the innermost frame in the user's own code, else the innermost in Menger's,
    else the innermost at all (frames outermost first, as (file, line, function))."""
    if not frames:
        return None
    for wanted in (_is_user_file, lambda path: path.startswith(_MENGER_DIR), lambda path: True):
        for path, line, function in reversed(frames):
            if wanted(path):
                return f"{path}:{line} in {function}"
    return None


def _frames_of(exc: BaseException) -> list[tuple[str, int, str]]:
    return [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]


def _frames_in_text(text: str) -> list[tuple[str, int, str]]:
    return [(path, int(line), function) for path, line, function in _FRAME.findall(text or "")]


@dataclass(frozen=True)
class Explanation:
    """What `menger` prints for a failure: `what` (one line), `where` it was raised, and hint lines."""

    what: str
    where: str | None = None
    hints: tuple[str, ...] = ()
    details: bool = field(default=True)  # a traceback would tell more (False: a config error says it all)

    def message(self, error_file: Path | None = None, debug: bool = False) -> str:
        lines = [f"menger: {self.what}"]
        if self.where:
            lines.append(f"  at {self.where}")
        lines += [f"  {hint}" for hint in self.hints]
        if error_file is not None:
            lines.append(f"  the message and the full traceback are in {error_file}")
        elif self.details and not debug:
            lines.append("  run again with --debug (or MENGER_DEBUG=1) for the traceback")
        return "\n".join(lines)


def explain(exc: BaseException, command: str = "train") -> Explanation:
    """Explain one exception that ended `menger COMMAND` (see the module's docstring)."""
    children = dict(getattr(exc, "child_errors", {}) or {})  # role -> (text, traceback)
    if children:  # the first child's error is the cause, and its traceback the place
        _, (text, child_tb) = next(iter(children.items()))
        type_name, _, message = text.partition(": ")
        return Explanation(str(exc), _place(_frames_in_text(child_tb)), _hint_lines(_hint(type_name, message)))
    root = _root_cause(exc)
    where = _place(_frames_of(root))
    if _is_menger_error(exc):  # Menger's own check: its text says what is wrong and what to do
        # a config error (or a missing extra) names its own fix; the ImportError it may chain from would only add a
        # generic hint
        hints = _hint_lines(_hint_for(root)) if root is not exc and not _names_its_fix(exc) else ()
        in_user_code = where is not None and _is_user_file(where.rsplit(":", 2)[0])
        own = tuple(h for h in _own_hints(exc) if NETWORK_CONTRACT not in " ".join(hints))
        return Explanation(str(exc), where if in_user_code else None, hints + own,
                           details=in_user_code or bool(hints))  # a traceback adds nothing to Menger's own check
    what = f"{command} failed: {type(exc).__name__}: {_first_line(exc)}"
    if root is not exc:
        what += f" ({type(root).__name__}: {_first_line(root)})"
    hints = _hint_lines(_hint_for(root)) or (
        "an error Menger did not expect; the traceback shows whether it comes from your code or Menger's",)
    return Explanation(what, where, hints)


def _own_hints(exc: BaseException) -> tuple[str, ...]:
    if isinstance(exc, NetworkBuildError):
        return (f"the contract: {NETWORK_CONTRACT}",)
    if isinstance(exc, UnknownEnvError) and "Cannot import" not in str(exc):
        return ("try: `menger presets` lists the experiments that ship, each on an env known to work; "
                "`menger train ppo --set env.id=ID` trains any gymnasium id",)
    return ()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [""]
    return lines[0] + (" [...]" if len(lines) > 1 else "")


def _hint_lines(hint: Hint | None) -> tuple[str, ...]:
    return () if hint is None else (f"likely cause: {hint.cause}", f"try: {hint.fix}")


def _names_its_fix(exc: BaseException) -> bool:
    return any(cls.__name__ in ("ConfigError", "MissingExtraError") for cls in type(exc).__mro__)


def error_report(exc: BaseException, message: str) -> str:
    """error.txt's text: when, the message, the traceback in this process, and every child's."""
    parts = [f"failed at {time.strftime('%Y-%m-%d %H:%M:%S %Z')}", "", message, "",
             "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()]
    for role, (text, child_tb) in (getattr(exc, "child_errors", {}) or {}).items():
        parts += ["", f"{role}: {text}", (child_tb or "(no traceback reported)").rstrip()]
    return "\n".join(parts) + "\n"


def write_error_file(run_dir: Path, exc: BaseException, command: str = "train") -> Path | None:
    """Write RUN_DIR/error.txt for a run that failed (None when it cannot be written: the failure stays the news)."""
    path = Path(run_dir) / ERROR_FILE
    try:
        path.write_text(error_report(exc, explain(exc, command).message(debug=True)))
    except OSError:
        return None
    return path
