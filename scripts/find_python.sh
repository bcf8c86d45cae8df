# scripts/find_python.sh -- sourced by scripts/pythons.sh and scripts/oldtf.sh (not run on its own).
#
# find_python X.Y: the newest CPython X.Y this machine has, on stdout (empty when none): pyenv's real binary
# under $PYENV_ROOT (default ~/.pyenv; a shim needs pyenv's environment), else python3.X on PATH.
find_python() {
  local minor=$1 exe="" root=${PYENV_ROOT:-$HOME/.pyenv}
  exe=$(compgen -G "$root/versions/$minor.*/bin/python$minor" | sort -V | tail -n 1 || true)
  if [[ -z $exe ]]; then
    exe=$(command -v "python$minor" || true)
    [[ $exe == */shims/* ]] && exe=""
  fi
  echo "$exe"
}
