#!/usr/bin/env bash
# The wheel as a user gets it: built from this checkout, checked to hold every file of the package, installed into
# a fresh venv without extras, and run from a directory outside the source tree:
#   1. `menger train cartpole-ppo` reaches a mean return of 475, and no optional package came with the core install;
#   2. with the `atari` extra, `menger train pong-impala --set stop.env_frames=20000` runs to its end.
#
#   PYTHON=.venv/bin/python .ci/wheel_check.sh   # `make wheel-check` does this; PYTHON needs the `build` package
#
# PYTHON builds the wheel; BASE_PYTHON (default: PYTHON's own base interpreter) makes the fresh venv; TORCH_SPEC
# (default torch==2.13.0, as in the Makefile) is installed into it first, so that pip never picks a torch itself.
# KEEP=1 keeps the temporary directory (wheel, venv, runs) and prints where it is.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
BASE_PYTHON="${BASE_PYTHON:-$("$PYTHON" -c 'import sys; print(sys._base_executable)')}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
OPTIONAL="ale-py pygame imageio imageio-ffmpeg optuna matplotlib ray onnx onnxruntime wandb"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/menger-wheel-check.XXXXXX")"
if [ "${KEEP:-0}" = 1 ]; then trap 'echo "wheel-check: kept $WORK"' EXIT; else trap 'rm -rf "$WORK"' EXIT; fi
began=$SECONDS
step() { echo "wheel-check [$((SECONDS - began)) s]: $*"; }

step "building the wheel"
"$PYTHON" -m build --wheel --outdir "$WORK/dist" "$ROOT" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
WHEEL="$(ls "$WORK"/dist/menger_rl-*.whl)"
step "built $(basename "$WHEEL")"

step "checking that it holds every file of the package, and the licence"
"$PYTHON" - "$WHEEL" "$ROOT" <<'EOF'
import subprocess, sys, zipfile
from pathlib import Path

wheel, root = sys.argv[1], Path(sys.argv[2])
names = set(zipfile.ZipFile(wheel).namelist())
try:  # every file git tracks under menger/ (a source tree without git: every file there)
    tracked = subprocess.run(["git", "-C", str(root), "ls-files", "menger"], capture_output=True, text=True,
                             check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):
    tracked = [str(p.relative_to(root)) for p in (root / "menger").rglob("*") if p.is_file()
               and "__pycache__" not in p.parts]
missing = sorted(name for name in tracked if name not in names)
licences = {name.rsplit("/", 1)[-1] for name in names if ".dist-info/licenses/" in name}
if missing or not {"LICENSE", "NOTICE"} <= licences:
    sys.exit(f"the wheel lacks {missing or ''} {sorted({'LICENSE', 'NOTICE'} - licences) or ''}")
print(f"  {len(tracked)} package files, LICENSE and NOTICE: all in the wheel")
EOF

step "a fresh venv with $TORCH_SPEC, then the wheel without extras"
"$BASE_PYTHON" -m venv "$WORK/venv"
VENV="$WORK/venv/bin"
"$VENV/python" -m pip install -q "$TORCH_SPEC"
"$VENV/python" -m pip install -q "$WHEEL"
for package in $OPTIONAL; do
  if "$VENV/python" -m pip show -q "$package" > /dev/null 2>&1; then
    echo "wheel-check: the core install pulled the optional package $package"; exit 1
  fi
done
step "no optional package installed ($OPTIONAL)"

mkdir "$WORK/outside" && cd "$WORK/outside"  # nothing of the checkout is importable from here
VERSION="$(basename "$WHEEL" | cut -d- -f2)"  # the version the wheel is named by
test "$("$VENV/menger" --version)" = "menger $VERSION"
step "menger train cartpole-ppo, from $PWD"
"$VENV/menger" train cartpole-ppo --run-dir cartpole --no-progress > cartpole.log 2>&1 || { tail -40 cartpole.log; exit 1; }
"$VENV/python" - cartpole <<'EOF'
import json, sys
from pathlib import Path

records = [json.loads(line) for line in Path(sys.argv[1], "metrics.jsonl").read_text().splitlines() if line.strip()]
best = max((r["episode/return_mean"] for r in records if r.get("episode/return_mean") is not None), default=None)
frames = max(r.get("step", 0) for r in records)
if best is None or best < 475:
    sys.exit(f"cartpole-ppo from the wheel reached a mean return of {best} in {frames} frames, not 475")
print(f"  cartpole-ppo reached {best:.1f} in {frames} frames")
EOF
grep -q "target reached" cartpole.log
"$VENV/python" -c "import json, sys; found = json.load(open('cartpole/system.json'))['packages']['menger']; \
sys.exit(None if found == sys.argv[1] else f'system.json says menger {found}, the wheel is {sys.argv[1]}')" "$VERSION"
grep -q "plot: *not written.*menger-rl\[plot\]" cartpole.log  # without matplotlib the run says what to install

step "the atari extra, then menger train pong-impala --set stop.env_frames=20000"
"$VENV/python" -m pip install -q "$WHEEL[atari]"
"$VENV/python" -m pip show -q pygame > /dev/null 2>&1 && { echo "wheel-check: the atari extra pulled pygame"; exit 1; }
"$VENV/menger" train pong-impala --set stop.env_frames=20000 --run-dir pong --no-progress > pong.log 2>&1 \
  || { tail -40 pong.log; exit 1; }
test -s pong/metrics.jsonl
step "passed"
