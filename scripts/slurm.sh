#!/usr/bin/env bash
# scripts/slurm.sh -- a real Slurm cluster for envpin's `slurm` test tier (tests/slurm): Debian 12's
# slurm-wlm 22.05 with munge, one controller container and N node containers on one Docker network,
# built from the debootstrapped bookworm rootfs scripts/services.sh caches (no image is pulled), with
# tensorflow-cpu in a venv of its own on every node for the multi-worker self-test (envpin fleet selftest).
# This host is the cluster's login node: it gets slurm-client and a munged of its own, and finds the
# cluster through SLURM_CONF=$RUN_DIR/slurm/conf/slurm.conf (printed by `up` and `status`).
#
# Usage: scripts/slurm.sh {up|down|status|node-env|help} [--nodes N]
# Run as root on Debian 12 with dockerd answering (scripts/services.sh start). See docs/slurm.md.
set -euo pipefail
set -o errtrace

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=slurm # the prefix of services.sh's say/warn/die/on_err messages
# shellcheck source=services.sh
source "$HERE/services.sh" # its functions and paths; its main does not run when sourced

# Bump to force a rebuild of the cluster image (part of its content key).
readonly SLURM_RECIPE_VERSION=2
readonly PREFIX=envpin-slurm
readonly NETWORK=$PREFIX
readonly CONTROLLER=$PREFIX-ctl
readonly IMAGE_NAME=$PREFIX:bookworm
readonly LABEL=org.envpin.slurm
readonly IMAGE_KEY_LABEL=org.envpin.slurm.key
readonly NODE_PACKAGES=(slurmd slurmctld slurm-client munge)
readonly HOST_PACKAGES=(slurm-client munge)
readonly PARTITION=debug
readonly IDLE_WAIT_S="${ENVPIN_SLURM_WAIT:-120}"
readonly SLURM_DIR="$RUN_DIR/slurm"
readonly SLURM_CONF_DIR="$SLURM_DIR/conf"
readonly SLURM_CONF_FILE="$SLURM_CONF_DIR/slurm.conf"
readonly MUNGE_KEY="$SLURM_DIR/munge.key"
readonly MUNGE_DIR="$SLURM_DIR/munge"
readonly MUNGE_SOCKET="$MUNGE_DIR/munge.socket.2"
readonly MUNGE_PIDFILE="$SLURM_DIR/munged.pid"
readonly MUNGE_LOG="$LOG_DIR/slurm-munged.log"
readonly SLURM_LOG="$LOG_DIR/slurm.log"
readonly IMAGE_CACHE="$CACHE_DIR/slurm"
# Inside the containers: where the key arrives, where the per-node task environment lives.
readonly IN_KEY=/etc/envpin-slurm/munge.key.in
readonly IN_TASK_ENV=/etc/envpin-slurm/task-env
readonly IN_TASK_PROLOG=/usr/local/lib/envpin-slurm/task-prolog
readonly IN_ENTRYPOINT=/usr/local/sbin/envpin-slurm-entrypoint
# TensorFlow on the nodes, for `envpin fleet selftest --slurm` (MultiWorkerMirroredStrategy across nodes): the
# version the host's `pip install -e '.[tf]'` resolves pyproject's tf extra to (tests/unit/test_slurm_script.py
# keeps it inside the extra), in a venv of its own, so the nodes' python3 stays without TensorFlow as the probe
# tests expect. The wheels are downloaded on this host (the containers need not reach PyPI) for the nodes'
# Python (bookworm's 3.11, checked in the chroot) and installed offline in the chroot.
readonly NODE_TF_REQUIREMENT=tensorflow-cpu==2.21.0
readonly NODE_PYTHON=3.11
readonly IN_TF_VENV=/opt/envpin-tf
readonly IN_WHEELS=/tmp/envpin-wheels

node_name() { printf '%s-n%d' "$PREFIX" "$1"; }

# Every client call goes to this cluster, whatever SLURM_CONF the caller's environment holds.
slurm_client() { SLURM_CONF=$SLURM_CONF_FILE "$@"; }

# --------------------------------------------------------------------------
# files baked into the image (their text is part of the image key)
# --------------------------------------------------------------------------
entrypoint_text() {
  cat <<EOF
#!/bin/sh
# envpin test cluster: start munged with the cluster's key, then run slurmctld or slurmd in the foreground.
# Written by scripts/slurm.sh. Usage: envpin-slurm-entrypoint controller|node
set -eu
role=\${1:?controller or node}
sock=\${ENVPIN_MUNGE_SOCKET:?}
install -d -m 0755 "\$(dirname "\$(dirname "\$sock")")"
install -d -o munge -g munge -m 0755 "\$(dirname "\$sock")"
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge /run/munge
install -o munge -g munge -m 0400 $IN_KEY /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged --socket="\$sock" --pid-file=/run/munge/munged.pid
# slurm.conf is written by scripts/slurm.sh once every container has its address.
waited=0
until [ -s /etc/slurm/slurm.conf ]; do
  [ "\$waited" -lt 120 ] || { echo "no /etc/slurm/slurm.conf after 120 s" >&2; exit 1; }
  sleep 0.5
  waited=\$((waited + 1))
done
case \$role in
  controller)
    install -d -o slurm -g slurm -m 0755 /var/lib/slurm/slurmctld
    exec /usr/sbin/slurmctld -D -i ;;
  node)
    install -d -m 0755 /var/lib/slurm/slurmd
    exec /usr/sbin/slurmd -D ;;
  *) echo "unknown role \$role" >&2; exit 2 ;;
esac
EOF
}

task_prolog_text() {
  cat <<EOF
#!/bin/sh
# Slurm TaskProlog: each "NAME=VALUE" line of $IN_TASK_ENV (a node-local file, absent by default)
# becomes an environment variable of every task on this node -- how a site sets per-node settings.
# Written by scripts/slurm.sh; \`scripts/slurm.sh node-env NODE NAME=VALUE...\` writes the file.
[ -r $IN_TASK_ENV ] || exit 0
while IFS= read -r line; do
  case \$line in
    '' | '#'*) ;;
    *) printf 'export %s\n' "\$line" ;;
  esac
done <$IN_TASK_ENV
EOF
}

# --------------------------------------------------------------------------
# the image: the services.sh bookworm rootfs + slurm packages, installed in a chroot on this host
# --------------------------------------------------------------------------
image_key() { # needs ROOTFS_TARBALL and WHEELS_DIR
  sha256_text "$SLURM_RECIPE_VERSION|$(<"$ROOTFS_TARBALL.sha256")|${NODE_PACKAGES[*]}|$(entrypoint_text)|$(task_prolog_text)|$NODE_TF_REQUIREMENT|$IN_TF_VENV|$(<"$WHEELS_DIR/SHA256SUMS")"
}

# --------------------------------------------------------------------------
# the nodes' TensorFlow wheels: downloaded once on this host, cached by what was asked for
# --------------------------------------------------------------------------
# pip download's --platform takes exact tags (pip 23 adds no older manylinux ones): every glibc tag a bookworm
# node (glibc 2.36) runs, the legacy aliases, and pure wheels.
node_platforms() {
  local m
  for ((m = 36; m >= 17; m--)); do printf -- '--platform=manylinux_2_%d_x86_64\n' "$m"; done
  printf -- '--platform=%s\n' manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64 linux_x86_64 any
}

host_pip() { # a pip on this host for `pip download` (Debian's python3-pip, else a venv of ours)
  if /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
    printf '%s\n' /usr/bin/python3
    return 0
  fi
  local venv="$IMAGE_CACHE/pip-venv"
  [[ -x $venv/bin/python ]] || run_logged "$LOG_DIR/slurm-image.log" /usr/bin/python3 -m venv "$venv"
  printf '%s\n' "$venv/bin/python"
}

WHEELS_DIR=""
ensure_wheels() { # sets WHEELS_DIR: NODE_TF_REQUIREMENT and its dependencies as wheels for the nodes
  local log="$LOG_DIR/slurm-image.log" key dir py started
  step "slurm node wheels" "$log"
  [[ $(dpkg --print-architecture) == amd64 ]] || die "the nodes' TensorFlow wheels are fetched for x86_64 only"
  key=$(sha256_text "$NODE_TF_REQUIREMENT|cp${NODE_PYTHON/./}|$(node_platforms | tr '\n' ' ')")
  dir="$IMAGE_CACHE/wheels-${key:0:16}"
  WHEELS_DIR=$dir
  [[ -s $dir/SHA256SUMS ]] && return 0
  mkdir -p "$IMAGE_CACHE"
  safe_rm_tree "$dir.tmp"
  mkdir -p "$dir.tmp"
  py=$(host_pip)
  started=$(date +%s)
  say "image: pip download $NODE_TF_REQUIREMENT for the nodes (Python $NODE_PYTHON) into $dir (log: $log)"
  local platforms=()
  mapfile -t platforms < <(node_platforms)
  run_logged "$log" "$py" -m pip download --disable-pip-version-check --no-input --dest "$dir.tmp" \
    --only-binary=:all: --implementation=cp --python-version="$NODE_PYTHON" \
    --abi="cp${NODE_PYTHON/./}" --abi=abi3 --abi=none "${platforms[@]}" "$NODE_TF_REQUIREMENT"
  (cd "$dir.tmp" && sha256sum -- *.whl | LC_ALL=C sort -k2 >SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS)
  rm -rf "$dir"
  mv -f "$dir.tmp" "$dir"
  local old
  for old in "$IMAGE_CACHE"/wheels-*; do
    [[ -d $old && $old != "$dir" ]] && safe_rm_tree "$old"
  done
  say "image: $(wc -l <"$dir/SHA256SUMS") wheels, $(du -sm "$dir" | cut -f1) MB, in $(($(date +%s) - started))s"
}

# install_node_tf ROOT : the TensorFlow venv in the chroot ROOT, from the cached wheels, without network.
install_node_tf() {
  local work=$1 log="$LOG_DIR/slurm-image.log" have
  have=$(chroot "$work" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [[ $have == "$NODE_PYTHON" ]] ||
    die "the nodes' python3 is $have, the wheels are for $NODE_PYTHON: change NODE_PYTHON in $0"
  say "image: $NODE_TF_REQUIREMENT into $IN_TF_VENV (offline, from $WHEELS_DIR) -- about a minute"
  run_logged "$log" chroot "$work" python3 -m venv "$IN_TF_VENV"
  install -d "$work$IN_WHEELS"
  # Read-only: nothing in the chroot (nor the clean-up after it) can touch the cache.
  mount --bind "$WHEELS_DIR" "$work$IN_WHEELS"
  mount -o remount,bind,ro "$work$IN_WHEELS"
  # A clean environment: this host's PIP_* settings (its indexes, find-links, caches) mean nothing there.
  CUR_LOG=$log
  printf '\n### %s: pip install %s (chroot, offline)\n' "$(date -u +%FT%TZ)" "$NODE_TF_REQUIREMENT" >>"$log"
  if ! chroot "$work" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$IN_TF_VENV/bin/python" -m pip install --no-index --find-links "$IN_WHEELS" "$NODE_TF_REQUIREMENT" \
    >>"$log" 2>&1; then
    umount "$work$IN_WHEELS" || true
    die "pip install of $NODE_TF_REQUIREMENT in the node image failed (log: $log)"
  fi
  umount "$work$IN_WHEELS"
  rmdir "$work$IN_WHEELS"
  # It imports (TensorFlow reads /proc as it loads).
  mount -t proc proc "$work/proc"
  printf '\n### %s: import tensorflow (chroot)\n' "$(date -u +%FT%TZ)" >>"$log"
  have=$(chroot "$work" env -i PATH=/usr/bin:/bin TF_CPP_MIN_LOG_LEVEL=2 "$IN_TF_VENV/bin/python" -c \
    'import tensorflow as tf; print(tf.__version__)' 2>>"$log") || have=""
  umount "$work/proc"
  [[ -n $have ]] || die "tensorflow does not import in the node image (log: $log)"
  say "image: tensorflow $have in $IN_TF_VENV"
}

local_image_label() {
  "$DOCKER" image inspect -f "{{index .Config.Labels \"$IMAGE_KEY_LABEL\"}}" "$1" 2>/dev/null || true
}

build_rootfs() { # build_rootfs KEY TARBALL : base rootfs + packages in a chroot, packed to TARBALL
  local key=$1 out=$2 log="$LOG_DIR/slurm-image.log" work="$WORK_DIR/slurm-rootfs"
  step "slurm image rootfs" "$log"
  safe_rm_tree "$work"
  mkdir -p "$work"
  say "image: installing ${NODE_PACKAGES[*]} into a bookworm chroot (log: $log)"
  run_logged "$log" tar --numeric-owner --xattrs -xpf "$ROOTFS_TARBALL" -C "$work"
  # apt inside the chroot resolves and reaches the mirror exactly as this host does.
  cp /etc/hosts "$work/etc/hosts"
  cp -L /etc/resolv.conf "$work/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d" # no service starts in the chroot
  chmod 0755 "$work/usr/sbin/policy-rc.d"
  # The packed rootfs has an empty /dev: the few device nodes apt and the maintainer scripts open.
  mknod -m 0666 "$work/dev/null" c 1 3
  mknod -m 0666 "$work/dev/zero" c 1 5
  mknod -m 0666 "$work/dev/random" c 1 8
  mknod -m 0666 "$work/dev/urandom" c 1 9
  run_logged "$log" chroot "$work" apt-get update
  run_logged "$log" chroot "$work" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${NODE_PACKAGES[@]}"
  run_logged "$log" chroot "$work" apt-get clean
  install_node_tf "$work"
  # The cluster's key is mounted at run time; no key is baked into the image.
  rm -f "$work/etc/munge/munge.key" "$work/usr/sbin/policy-rc.d" "$work/etc/hosts" "$work/etc/resolv.conf" \
    "$work"/dev/{null,zero,random,urandom}
  rm -rf "${work:?}"/var/lib/apt/lists/* "${work:?}"/var/log/*.log "${work:?}"/tmp/* "${work:?}"/var/tmp/*
  install -d "$work/etc/envpin-slurm" "$(dirname "$work$IN_TASK_PROLOG")"
  entrypoint_text >"$work$IN_ENTRYPOINT"
  task_prolog_text >"$work$IN_TASK_PROLOG"
  chmod 0755 "$work$IN_ENTRYPOINT" "$work$IN_TASK_PROLOG"
  run_logged "$log" tar --numeric-owner --xattrs -C "$work" \
    --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf "$out.tmp" .
  mv -f "$out.tmp" "$out"
  safe_rm_tree "$work"
  local old
  for old in "$IMAGE_CACHE"/rootfs-*.tar; do
    [[ -e $old && $old != "$out" ]] && rm -f "$old"
  done
  say "image: rootfs cached as $out (key ${key:0:12})"
}

ensure_image() {
  local log="$LOG_DIR/slurm-image.log" key tarball
  step "slurm image" "$log"
  ensure_rootfs bookworm
  ensure_wheels
  key=$(image_key)
  if [[ $(local_image_label "$IMAGE_NAME") == "$key" ]]; then
    say "image: $IMAGE_NAME up to date (key ${key:0:12})"
    return 0
  fi
  mkdir -p "$IMAGE_CACHE"
  tarball="$IMAGE_CACHE/rootfs-${key:0:16}.tar"
  [[ -s $tarball ]] || build_rootfs "$key" "$tarball"
  say "image: importing $IMAGE_NAME"
  CUR_LOG=$log
  printf '\n### %s: docker import %s\n' "$(date -u +%FT%TZ)" "$IMAGE_NAME" >>"$log"
  if ! "$DOCKER" import \
    --change "ENV LANG=C.UTF-8" \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENTRYPOINT [\"$IN_ENTRYPOINT\"]" \
    --change "LABEL $LABEL=\"1\" $IMAGE_KEY_LABEL=\"$key\"" \
    --message "envpin Slurm test cluster (slurm-wlm + munge, $NODE_TF_REQUIREMENT in $IN_TF_VENV, Debian bookworm)" \
    "$tarball" "$IMAGE_NAME" >>"$log" 2>&1; then
    die "docker import of $IMAGE_NAME failed (log: $log)"
  fi
  "$DOCKER" image prune -f --filter "label=$LABEL=1" >>"$log" 2>&1 || true
}

# --------------------------------------------------------------------------
# host side: slurm-client and a munged of our own (own socket, key and pidfile)
# --------------------------------------------------------------------------
install_host_packages() {
  local log="$LOG_DIR/slurm-install.log" p missing=()
  step "slurm host packages" "$log"
  for p in "${HOST_PACKAGES[@]}"; do
    pkg_installed "$p" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "host: apt-get install ${missing[*]} (log: $log)"
  printf '\n### %s: apt-get update\n' "$(date -u +%FT%TZ)" >>"$log"
  apt-get update >>"$log" 2>&1 || warn "apt-get update reported errors; trying the install anyway; see $log"
  run_logged "$log" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

start_host_munged() {
  step "host munged" "$MUNGE_LOG"
  if pid_alive "$MUNGE_PIDFILE" munged && [[ -S $MUNGE_SOCKET ]]; then
    return 0
  fi
  install -d -m 0755 "$MUNGE_DIR"
  rm -f "$MUNGE_PIDFILE"
  printf '\n### %s: starting munged\n' "$(date -u +%FT%TZ)" >>"$MUNGE_LOG"
  # munged daemonizes and writes its pidfile; fd 9 (the services lock) is not handed down.
  if ! munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_KEY" --pid-file="$MUNGE_PIDFILE" \
    --log-file="$MUNGE_LOG" --seed-file="$SLURM_DIR/munged.seed" 9>&- >>"$MUNGE_LOG" 2>&1; then
    die "munged did not start (log: $MUNGE_LOG)"
  fi
  pid_alive "$MUNGE_PIDFILE" munged || die "munged exited right after start (log: $MUNGE_LOG)"
  say "host: munged on $MUNGE_SOCKET (pid $(<"$MUNGE_PIDFILE"))"
}

stop_host_munged() { stop_pidfile munged "$MUNGE_PIDFILE" munged 10 >/dev/null; }

# --------------------------------------------------------------------------
# the cluster
# --------------------------------------------------------------------------
cluster_containers() { "$DOCKER" ps -a --filter "label=$LABEL=1" --format '{{.Names}}' | sort; }

container_ip() {
  "$DOCKER" inspect -f "{{(index .NetworkSettings.Networks \"$NETWORK\").IPAddress}}" "$1"
}

write_slurm_conf() { # write_slurm_conf N : every container has an address by now
  local n=$1 i name tmp="$SLURM_CONF_FILE.tmp"
  {
    cat <<EOF
# Written by scripts/slurm.sh -- the envpin test cluster; rewritten by every \`up\`.
# Containers have no cgroup delegation: process tracking by /proc, no task or accounting plugins.
ClusterName=envpin
SlurmctldHost=$CONTROLLER($(container_ip "$CONTROLLER"))
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
# srun and salloc on the login node listen here for the nodes' and the controller's connections.
SrunPortRange=60001-60999
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
MailProg=/bin/true
TaskProlog=$IN_TASK_PROLOG
EOF
    for ((i = 1; i <= n; i++)); do
      name=$(node_name "$i")
      printf 'NodeName=%s NodeAddr=%s CPUs=1 State=UNKNOWN\n' "$name" "$(container_ip "$name")"
    done
    printf 'PartitionName=%s Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n' "$PARTITION"
  } >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$SLURM_CONF_FILE"
}

run_container() { # run_container NAME ROLE
  local name=$1 role=$2 log=$SLURM_LOG
  run_logged "$log" "$DOCKER" run -d --init --name "$name" --hostname "$name" --network "$NETWORK" \
    --label "$LABEL=1" --label "$LABEL.role=$role" \
    -e "ENVPIN_MUNGE_SOCKET=$MUNGE_SOCKET" \
    -v "$SLURM_CONF_DIR:/etc/slurm:ro" -v "$MUNGE_KEY:$IN_KEY:ro" \
    "$IMAGE_NAME" "$role"
}

# node states as "name state" lines; a state keeps Slurm's flags ("idle*": not responding is not idle)
node_states() { slurm_client timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null | sort -u; }

wait_idle() { # wait_idle N
  local n=$1 waited=0 idle states
  step "wait for idle nodes" "$SLURM_LOG"
  while :; do
    states=$(node_states || true)
    idle=$(grep -c ' idle$' <<<"$states" || true)
    ((idle == n)) && break
    if ((waited >= IDLE_WAIT_S)); then
      printf '[slurm] sinfo after %ss:\n%s\n' "$waited" "${states:-(no answer from slurmctld)}" >&2
      local c
      for c in $(cluster_containers); do
        printf '[slurm] --- docker logs %s (last lines) ---\n' "$c" >&2
        "$DOCKER" logs --tail 15 "$c" >&2 2>&1 || true
      done
      die "the cluster did not show $n idle nodes within ${IDLE_WAIT_S}s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  say "cluster: $n nodes idle after ${waited}s"
}

# healthy N : the running cluster is the one `up --nodes N` would make (image, containers, munged, sinfo).
healthy() {
  local n=$1 want have key i c
  [[ -s $SLURM_CONF_FILE && -s $MUNGE_KEY ]] || return 1
  key=$(local_image_label "$IMAGE_NAME")
  [[ -n $key ]] || return 1
  want=$CONTROLLER
  for ((i = 1; i <= n; i++)); do want+=$'\n'$(node_name "$i"); done
  have=$("$DOCKER" ps --filter "label=$LABEL=1" --filter status=running --format '{{.Names}}' | sort)
  [[ $have == "$(sort <<<"$want")" ]] || return 1
  for c in $have; do
    [[ $("$DOCKER" inspect -f '{{index .Config.Labels "'"$IMAGE_KEY_LABEL"'"}}' "$c") == "$key" ]] || return 1
  done
  pid_alive "$MUNGE_PIDFILE" munged || return 1
  [[ $(node_states | grep -c ' idle$' || true) == "$n" ]]
}

remove_cluster() { # containers and network; the image stays unless asked
  local c
  for c in $(cluster_containers); do
    "$DOCKER" rm -f "$c" >/dev/null
    say "removed container $c"
  done
  if "$DOCKER" network inspect "$NETWORK" >/dev/null 2>&1; then
    "$DOCKER" network rm "$NETWORK" >/dev/null
    say "removed network $NETWORK"
  fi
}

print_client_env() {
  say "login node: this host (slurm-client $(dpkg-query -W -f='${Version}' slurm-client 2>/dev/null || echo '?'))"
  say "  export SLURM_CONF=$SLURM_CONF_FILE"
}

cmd_up() {
  local n=$1 i started
  need_root
  take_lock
  docker_answers || die "dockerd is not answering; run: bash scripts/services.sh start"
  mkdir -p "$SLURM_DIR" "$SLURM_CONF_DIR"
  install_host_packages
  ensure_image
  if healthy "$n"; then
    start_host_munged
    say "cluster: already up ($n nodes idle)"
    print_client_env
    return 0
  fi
  started=$(date +%s)
  step "cluster up" "$SLURM_LOG"
  say "cluster: creating $CONTROLLER + $n nodes on network $NETWORK (log: $SLURM_LOG)"
  remove_cluster
  stop_host_munged
  rm -f "$SLURM_CONF_FILE"
  # A fresh key for a fresh cluster; the containers and this host's munged share it.
  (umask 077 && head -c 1024 /dev/urandom >"$MUNGE_KEY.tmp") && mv -f "$MUNGE_KEY.tmp" "$MUNGE_KEY"
  run_logged "$SLURM_LOG" "$DOCKER" network create --label "$LABEL=1" "$NETWORK"
  run_container "$CONTROLLER" controller
  for ((i = 1; i <= n; i++)); do
    run_container "$(node_name "$i")" node
  done
  write_slurm_conf "$n"
  start_host_munged
  wait_idle "$n"
  say "cluster: up in $(($(date +%s) - started))s: $(slurm_client sinfo -h -o '%P %a %D %T %N' | tr '\n' ' ')"
  print_client_env
}

cmd_down() {
  need_root
  take_lock
  step "cluster down" "$SLURM_LOG"
  docker_answers || die "dockerd is not answering; run: bash scripts/services.sh start"
  remove_cluster
  stop_host_munged
  if "$DOCKER" image inspect "$IMAGE_NAME" >/dev/null 2>&1; then
    "$DOCKER" image rm "$IMAGE_NAME" >/dev/null
    say "removed image $IMAGE_NAME (its rootfs stays cached in $IMAGE_CACHE)"
  fi
  rm -rf "${SLURM_DIR:?}"
  say "cluster: down"
}

cmd_status() {
  local rc=0 c states
  if ! docker_answers; then
    say "dockerd: DOWN"
    return 1
  fi
  for c in $(cluster_containers); do
    say "container $c: $("$DOCKER" inspect -f '{{.State.Status}} {{(index .NetworkSettings.Networks "'"$NETWORK"'").IPAddress}}' "$c" 2>/dev/null || echo '?')"
  done
  [[ -n $(cluster_containers) ]] || { say "containers: NONE"; rc=1; }
  if pid_alive "$MUNGE_PIDFILE" munged; then
    say "host munged: up (pid $(<"$MUNGE_PIDFILE"), socket $MUNGE_SOCKET)"
  else
    say "host munged: DOWN"
    rc=1
  fi
  if [[ -s $SLURM_CONF_FILE ]] && command -v sinfo >/dev/null && states=$(node_states) && [[ -n $states ]]; then
    while read -r c; do say "node $c"; done <<<"$states"
    grep -qv ' idle$' <<<"$states" && rc=1
    print_client_env
  else
    say "slurmctld: no answer (sinfo with SLURM_CONF=$SLURM_CONF_FILE)"
    rc=1
  fi
  return "$rc"
}

# node-env NODE [NAME=VALUE...] : the node's task environment (none given: cleared).
cmd_node_env() {
  local node=${1:-}
  [[ -n $node ]] || die "usage: node-env NODE [NAME=VALUE...] (NODE: e.g. $(node_name 2))"
  shift
  local a text=""
  for a in "$@"; do
    [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*= && $a != *$'\n'* ]] || die "not NAME=VALUE: $a"
    text+="$a"$'\n'
  done
  "$DOCKER" inspect -f '{{index .Config.Labels "'"$LABEL.role"'"}}' "$node" 2>/dev/null | grep -qx node ||
    die "$node is not a node container of this cluster (see: bash $0 status)"
  printf '%s' "$text" | "$DOCKER" exec -i "$node" sh -c "cat >$IN_TASK_ENV.tmp && mv -f $IN_TASK_ENV.tmp $IN_TASK_ENV"
  if (($#)); then say "$node: tasks get $*"; else say "$node: task environment cleared"; fi
}

usage() {
  cat <<EOF
usage: bash scripts/slurm.sh COMMAND [--nodes N]   (as root; dockerd must answer)

  up [--nodes N]   build the image $IMAGE_NAME (slurm-wlm 22.05 + munge on the services.sh bookworm
                   rootfs, $NODE_TF_REQUIREMENT in $IN_TF_VENV), start $CONTROLLER and N nodes (default 3) on network $NETWORK, install
                   slurm-client and munge on this host and start its munged, wait until sinfo shows
                   every node idle; does nothing when that cluster is already up
  down             remove the containers, the network, the image and $SLURM_DIR; stop the host munged
  status           containers, host munged and node states (exit 1 unless all is up and idle)
  node-env NODE [NAME=VALUE...]
                   set (or with no pairs clear) environment variables for every task on NODE, through
                   the cluster's TaskProlog -- one node made to differ, as the tests do

Clients on this host: export SLURM_CONF=$SLURM_CONF_FILE   logs: $LOG_DIR/slurm*.log   see docs/slurm.md
EOF
}

slurm_main() {
  local cmd=${1:-help} nodes=3
  shift || true
  if [[ $cmd == up ]]; then
    while (($#)); do
      case $1 in
        --nodes)
          [[ ${2:-} =~ ^[1-9][0-9]?$ ]] || die "--nodes needs a count from 1 to 99"
          nodes=$2
          shift 2
          ;;
        --nodes=*)
          nodes=${1#--nodes=}
          [[ $nodes =~ ^[1-9][0-9]?$ ]] || die "--nodes needs a count from 1 to 99"
          shift
          ;;
        *) die "unknown option $1 (see: bash $0 help)" ;;
      esac
    done
  fi
  case $cmd in
    up) cmd_up "$nodes" ;;
    down) cmd_down ;;
    status) cmd_status || exit 1 ;;
    node-env) cmd_node_env "$@" ;;
    help | -h | --help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

slurm_main "$@"
