#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for the tests of `--executor slurm`
# (tests/jobs/test_slurm.py): Debian's slurmctld, slurmd, slurm-client and munge (Slurm 22.05).
#
#   scripts/slurm_local.sh install      install the packages when missing (root + apt-get, as
#                                       scripts/setup_browser.sh does for Chromium); never fatal
#   scripts/slurm_local.sh start DIR    write a configuration for this machine's cores and memory
#                                       into DIR, start munged, slurmctld and slurmd, wait until
#                                       the node takes jobs; prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm_local.sh stop DIR     stop the three daemons started from DIR
#
# Everything (key, sockets, state, spool, logs) lives in DIR: nothing in /etc is touched, so a
# cluster of this kind can run beside none other and leaves nothing behind. Clients find it
# through SLURM_CONF. The daemons run as root (SlurmUser=root): it is a test cluster.
# No cgroups (proctrack/linuxproc, task/none: containers rarely delegate them) and no accounting
# database (slurmdbd needs MySQL): `sacct` has nothing to say here, so rt_lib/jobs/executor.py reads
# job states from `squeue`, as it does on any cluster whose accounting is off.
set -uo pipefail
PACKAGES=(slurmctld slurmd slurm-client munge)

have() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
         && command -v sbatch >/dev/null && command -v munged >/dev/null; }

install() {
  have && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian's Slurm and munge for the Slurm tests"
    export DEBIAN_FRONTEND=noninteractive
    local log=/tmp/rt-slurm-install.log
    if ! apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$log" 2>&1; then
      apt-get update -qq >>"$log" 2>&1
      apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >>"$log" 2>&1 \
        || echo "setup: could not install Slurm (see $log); the Slurm tests will be skipped"
    fi
    # the packages start their own daemons from /etc: ours use a folder of their own
    for unit in slurmctld slurmd munge; do
      (command -v systemctl >/dev/null && systemctl stop "$unit") >/dev/null 2>&1 || true
    done
  else
    echo "setup: no Slurm and no root apt-get: the Slurm tests will be skipped" \
         "(install ${PACKAGES[*]} to run them)"
  fi
  return 0
}

start() {
  local dir="$1"
  have || { echo "slurm_local: Slurm is not installed (scripts/slurm_local.sh install)" >&2; return 1; }
  [ "$(id -u)" = 0 ] || { echo "slurm_local: the daemons need root" >&2; return 1; }
  mkdir -p "$dir"/{munge,state,spool,log} && dir="$(cd "$dir" && pwd)"
  local host cpus mem_mb port
  host="$(hostname -s)"
  cpus="$(nproc)"
  # what slurmd would report, less a tenth for the rest of the machine
  mem_mb="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
  port="${RT_SLURM_PORT:-6817}"

  # munge: a fresh key and a socket of our own
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 700 "$dir/munge" && chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" || { echo "slurm_local: munged did not start" >&2; return 1; }

  cat >"$dir/slurm.conf" <<EOF
# written by scripts/slurm_local.sh: one node, this machine ($cpus CPUs, $mem_mb MiB)
ClusterName=rtlocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
ReturnToService=2
# finished jobs stay visible to squeue for a while: that is where their final state is read
MinJobAge=600
# submitit lets a job outlive SIGTERM (it requeues on a signal of its own): scancel then waits
# KillWait seconds before SIGKILL, 30 by default
KillWait=5
SlurmdTimeout=60
# a job asks for a CPU's share of the memory unless it says (else each would take the node)
DefMemPerCPU=$((mem_mb / cpus))
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF" || { echo "slurm_local: slurmctld did not start (see $dir/log)" >&2; return 1; }
  slurmd -N "$host" -f "$SLURM_CONF" || { echo "slurm_local: slurmd did not start (see $dir/log)" >&2; return 1; }
  local i
  for i in $(seq 1 60); do  # the node registers within a few seconds
    if sinfo -h -N -o "%t" 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.5
  done
  echo "slurm_local: the node never became idle (see $dir/log)" >&2
  sinfo -N >&2 || true
  return 1
}

stop() {
  local dir="$1" pidfile pid
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  return 0
}

case "${1:-}" in
  install) install ;;
  start) [ -n "${2:-}" ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
  stop) [ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 install | start DIR | stop DIR" >&2; exit 2 ;;
esac
