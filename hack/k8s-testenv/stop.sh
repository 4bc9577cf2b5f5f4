#!/usr/bin/env bash
# Stops what start.sh started in <workdir>: the apiserver first (so it never
# sees etcd vanish under it), then etcd; SIGTERM, then SIGKILL after 10 s.
# Removes <workdir> unless --keep is given.
# Usage: stop.sh <workdir> [--keep]
set -uo pipefail

[ $# -ge 1 ] || { echo "usage: $0 <workdir> [--keep]" >&2; exit 2; }
work=$1
keep=${2:-}
[ -d "$work" ] || { echo "nothing to stop: $work does not exist"; exit 0; }

# ours PID NAME: true if PID runs our binary NAME with this workdir in its
# arguments, so that a recycled pid never gets killed.
ours() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$2"* && $cmdline == *"$work"* ]]
}

rc=0
for name in kube-apiserver etcd; do
  pidfile=$work/$name.pid
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if ! kill -0 "$pid" 2>/dev/null || ! ours "$pid" "$name"; then
    rm -f "$pidfile"
    continue
  fi
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name (pid $pid) ignored SIGTERM for 10s: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
    sleep 0.2
  fi
  if kill -0 "$pid" 2>/dev/null && ours "$pid" "$name"; then
    echo "$name (pid $pid) still running" >&2
    rc=1
  else
    echo "$name stopped"
    rm -f "$pidfile"
  fi
done

if [ "$keep" != "--keep" ] && [ "$rc" = 0 ]; then
  # Only a directory made by start.sh is removed.
  if [ -f "$work/.switchback-testenv" ]; then
    rm -rf "$work"
  else
    echo "not removing $work: not made by start.sh" >&2
  fi
fi
exit "$rc"
