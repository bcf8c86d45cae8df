#!/usr/bin/env bash
# scripts/gpu-selftest.sh -- the multi-replica self-test on a machine with NVIDIA GPUs, from a checkout.
#
# Usage: bash scripts/gpu-selftest.sh OUT_DIR [PYTHON]
#
# Writes into OUT_DIR (created):
#   probe.json, probe.md   the standard-library probe with the distributed stack (NCCL, NVML topology,
#                          visible devices), --anonymize, no self-test: runs with or without TensorFlow
#   replicas.json          python -m envpin.probe.replicas --replicas <visible GPUs>: MirroredStrategy over
#                          every visible GPU (NCCL all-reduce) in two fresh runs, MWMS over two workers on
#                          loopback; only where PYTHON can import TensorFlow 2.4 or later
#   selftest.json          the whole self-test with --replicas <visible GPUs>, same condition
#   nvidia-smi.txt         nvidia-smi -L and the topology matrix (nvidia-smi topo -m), for the record
#   summary.txt            one line per step: what ran, its exit status, or why it did not run
# Exit 0 when every step that could run passed; 1 when a self-test found a problem; 2 on bad usage.
# The reports are fixtures as they are: tests/gpu_reports/README.md says how they were made.
set -uo pipefail

out=${1:-}
py=${2:-python3}
if [[ -z "$out" ]]; then
  echo "error: no output folder given" >&2
  echo "hint: bash scripts/gpu-selftest.sh OUT_DIR [PYTHON]" >&2
  exit 2
fi
if ! command -v "$py" >/dev/null 2>&1; then
  echo "error: $py not found" >&2
  echo "hint: pass the python of an environment with TensorFlow as the second argument" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
status=0

note() { echo "$*" | tee -a "$summary" >&2; }

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  { nvidia-smi -L; echo; nvidia-smi topo -m; } >"$out/nvidia-smi.txt" 2>&1 || true
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
note "visible GPUs (nvidia-smi -L): $gpus"

"$py" -m envpin.probe --anonymize --no-selftest --json "$out/probe.json" --markdown "$out/probe.md"
note "probe (no self-test): exit $?"

if ! "$py" -c 'import tensorflow' >/dev/null 2>&1; then
  note "multi-replica self-test not run: $py cannot import tensorflow"
  exit 0
fi
replicas=$gpus
if ((gpus < 2)); then
  # On GPUs every visible GPU is a replica: with one (or none) the CPU, split into two logical devices,
  # still checks the all-reduce path and MWMS; the GPU is hidden from TensorFlow for it.
  note "fewer than 2 GPUs: the self-test runs on the CPU split into 2 logical devices (CUDA_VISIBLE_DEVICES='')"
  export CUDA_VISIBLE_DEVICES=
  replicas=2
fi
"$py" -m envpin.probe.replicas --replicas "$replicas" >"$out/replicas.json"
rc=$?
note "python -m envpin.probe.replicas --replicas $replicas: exit $rc"
((rc == 0)) || status=1
"$py" -m envpin.probe.selftest --quick --replicas "$replicas" >"$out/selftest.json"
rc=$?
note "python -m envpin.probe.selftest --quick --replicas $replicas: exit $rc"
((rc == 0)) || status=1
exit $status
