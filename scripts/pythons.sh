#!/usr/bin/env bash
# scripts/pythons.sh -- run the Python versions envpin claims, instead of only claiming them.
#
# Host side: for each CPython from the declared minimum (3.10) to 3.13, a virtual environment under
# .pythons/<version> (gitignored) gets `pip install -e '.[test]'` and runs the CLI's unit and golden tiers;
# the 3.12 run reports the package's coverage (also written to .pythons/coverage.txt).
# The version of the main .venv is left out by default: .ci/run's main pytest run covers it (--all adds it).
# Image side: the probe, envpin.pyz, envpin.enable_determinism and the Slurm node task run under real
# CPython 3.6 to 3.9 (what NGC images ship) with warnings as errors: tests/pythons, run once here with the
# main .venv.
#
# Interpreters come from pyenv ($PYENV_ROOT, default ~/.pyenv) or python3.X on PATH. A missing one is
# skipped with a message on a laptop and is an error with CI=true (.ci/run sets it).
#
# Usage: bash scripts/pythons.sh [--all] [VERSION...]   (default: 3.10 3.11 3.12 3.13 less the .venv's)
# Prints one line per version: passed/failed/skipped counts and seconds; exits 1 if any version failed.
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
versions=()
for arg in "$@"; do
  case $arg in
    --all) all=1 ;;
    3.*) versions+=("$arg") ;;
    *) echo "error: unknown argument: $arg" >&2; echo "hint: bash scripts/pythons.sh [--all] [3.X ...]" >&2; exit 2 ;;
  esac
done
((${#versions[@]})) || versions=(3.10 3.11 3.12 3.13)
COVERAGE_MINOR=3.12  # the version whose run reports the package's coverage (see below)
ci=$([[ ${CI:-} == true ]] && echo 1 || echo 0)
main_minor=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)

# find_python X.Y: the newest CPython X.Y this machine has (pyenv's real binary, else PATH).
source scripts/find_python.sh

summary=()
failed=0
start_all=$SECONDS
for minor in "${versions[@]}"; do
  if [[ $minor == "$main_minor" && $all == 0 ]]; then
    summary+=("$minor: covered by the main .venv run (--all runs it here too)")
    continue
  fi
  python=$(find_python "$minor")
  if [[ -z $python ]]; then
    if ((ci)); then
      summary+=("$minor: FAILED (no CPython $minor on this machine; CI=true may not skip it)")
      failed=1
    else
      summary+=("$minor: skipped (no CPython $minor: pyenv install $minor)")
    fi
    continue
  fi
  venv=.pythons/$minor
  t0=$SECONDS
  echo "== Python $minor ($python): $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # pip's output goes to a log, shown when it fails (a test dependency that has no release for this version).
  if ! { "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
         "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'; } >"$venv/pip.log" 2>&1; then
    cat "$venv/pip.log" >&2
    summary+=("$minor: FAILED (pip install -e '.[test]' failed, log $venv/pip.log)")
    failed=1
    continue
  fi
  log=$venv/pytest.log
  # tensorflow-marked tests are left out: these venvs do not install TensorFlow (the main .venv does).
  set +e
  # -n 2: both tiers run in-process (no subprocess, nothing shared), so two workers halve the wall time.
  # The coverage report comes from this run under $COVERAGE_MINOR: Python 3.12's sys.monitoring makes tracing
  # cost nothing measurable here (2606 tests: 172 s without, 167 s with, -n 2), where 3.11's tracer added
  # ~50 s to the unit tier of the main run.
  cov=()
  [[ $minor == "$COVERAGE_MINOR" ]] && cov=(--cov=envpin --cov-report=term:skip-covered)
  COVERAGE_CORE=sysmon "$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 -m "not tensorflow" "${cov[@]}" \
    tests/unit tests/golden 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  counts=$(tail -n 1 "$log" | grep -oE '[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' \
           | paste -sd, - | sed 's/,/, /g')
  summary+=("$minor: ${counts:-no result} in $((SECONDS - t0)) s ($("$venv/bin/python" -V))")
  if ((${#cov[@]})); then
    total=$(grep -E '^TOTAL ' "$log" | awk '{print $NF}' || true)
    summary[-1]+=", coverage of envpin by the unit and golden tiers: ${total:-none}"
    printf '%s\n' "${summary[-1]}" >.pythons/coverage.txt
  fi
  ((rc == 0)) || { failed=1; summary[-1]+=" FAILED (exit $rc, log $log)"; }
done

echo "== Python 3.6-3.9: the probe, envpin.pyz, enable_determinism, the run hook and the node task (tests/pythons)"
t0=$SECONDS
log=.pythons/old.log
mkdir -p .pythons
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -rA tests/pythons >"$log" 2>&1
rc=$?
set -e
grep -E '^(FAILED|ERROR|SKIPPED)' "$log" || true
tail -n 1 "$log"
for minor in 3.6 3.7 3.8 3.9; do
  # -rA lists every test as "PASSED tests/...::name[3.6-...]"; the interpreter is the id's first part.
  per=$(grep -E "^[A-Z]+ .*\[$minor[]-]" "$log" | cut -d' ' -f1 | sort | uniq -c | awk '{printf "%s%d %s", sep, $1, tolower($2); sep=", "}')
  summary+=("$minor (probe side): ${per:-no result}")
done
summary+=("3.6-3.9 (probe side): $((SECONDS - t0)) s, log $log")
((rc == 0)) || { failed=1; summary[-1]+=" FAILED (exit $rc)"; }

echo "== pythons.sh summary ($((SECONDS - start_all)) s)"
printf '  %s\n' "${summary[@]}"
exit $failed
