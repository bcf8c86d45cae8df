#!/usr/bin/env bash
# scripts/oldtf.sh -- older TensorFlow releases for the `oldtf` tests of envpin bisect/study/cost.
#
# Makes one virtual environment per release under $ENVPIN_OLDTF_DIR (default /opt/envpin-tools/oldtf), with
# the CPU wheel and the pins it needs on this Python, then, with --test, runs tests/oldtf (marker oldtf;
# .ci/run's main pytest run runs them too, so .ci/run calls this without --test):
#
#   1.12 (CPython 3.6)  NGC 19.01's TensorFlow (tf.compat without v1): TF1 seeding in enable_determinism and
#                       in the run hook of envpin study (envpin/probe/seeding.py)
#   1.15 (CPython 3.6)  the TF_CUDNN_DETERMINISTIC recipe (tests/oldtf/test_enable_determinism_oldtf.py)
#   2.1  (CPython 3.7)  TensorFlow's debugger dumps but cannot read them back: bisect must refuse (exit 2)
#   2.4  (CPython 3.8)  the oldest 2.x with wheels for the oldest CPython here whose wheels install
#   2.12 (CPython 3.11) Keras 2 (tf.keras) instead of Keras 3
#
# Interpreters come from pyenv ($PYENV_ROOT, default ~/.pyenv) or python3.X on PATH; uv (.venv/bin/uv, a
# dev dependency) installs the wheels. An environment whose TensorFlow already imports at the right version
# is kept. A missing interpreter is skipped with a message on a laptop and is an error with CI=true.
#
# Usage: bash scripts/oldtf.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."

root=${ENVPIN_OLDTF_DIR:-/opt/envpin-tools/oldtf}
uv=.venv/bin/uv
ci=$([[ ${CI:-} == true ]] && echo 1 || echo 0)
test=0
for arg in "$@"; do
  case $arg in
    --test) test=1 ;;
    *) echo "error: unknown argument: $arg" >&2; echo "hint: bash scripts/oldtf.sh [--test]" >&2; exit 2 ;;
  esac
done
[[ -x $uv ]] || { echo "error: $uv not found" >&2; echo "hint: pip install -e '.[dev,tf]' into .venv first" >&2; exit 2; }

# find_python X.Y: the newest CPython X.Y this machine has (pyenv's real binary, else PATH).
source scripts/find_python.sh

# release  python  requirements (protobuf<3.20: these releases' generated code predates protobuf 4)
releases=(
  "1.12 3.6 tensorflow==1.12.* numpy<1.17 protobuf<3.20"
  "1.15 3.6 tensorflow==1.15.* protobuf<3.20"
  "2.1 3.7 tensorflow-cpu==2.1.* protobuf<3.20"
  "2.4 3.8 tensorflow-cpu==2.4.* numpy<1.20 protobuf<3.20"
  "2.12 3.11 tensorflow-cpu==2.12.*"
)
failed=0
start=$SECONDS
mkdir -p "$root"
for line in "${releases[@]}"; do
  read -r release minor reqs <<<"$line"
  venv=$root/tf-$release
  have=$("$venv/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n 1 || true)
  if [[ $have == "$release".* ]]; then
    echo "oldtf: TensorFlow $have in $venv (kept)"
    continue
  fi
  python=$(find_python "$minor")
  if [[ -z $python ]]; then
    if ((ci)); then
      echo "oldtf: FAILED: no CPython $minor for TensorFlow $release (CI=true may not skip it)" >&2
      failed=1
    else
      echo "oldtf: skipped TensorFlow $release: no CPython $minor (pyenv install $minor)"
    fi
    continue
  fi
  t0=$SECONDS
  rm -rf "$venv"
  # shellcheck disable=SC2086 # reqs is a list of requirement words
  if ! { "$uv" venv -q "$venv" -p "$python" && "$uv" pip install -q -p "$venv/bin/python" $reqs; } \
      >"$root/tf-$release.log" 2>&1; then
    cat "$root/tf-$release.log" >&2
    echo "oldtf: FAILED: TensorFlow $release did not install (log $root/tf-$release.log)" >&2
    failed=1
    continue
  fi
  have=$("$venv/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n 1 || true)
  echo "oldtf: TensorFlow $have on $python in $venv ($((SECONDS - t0)) s)"
done
echo "oldtf: environments ready in $((SECONDS - start)) s"
((failed)) && exit 1
if ((test)); then
  ENVPIN_OLDTF_DIR=$root .venv/bin/python -m pytest -q --durations=0 -m oldtf tests/oldtf
fi
