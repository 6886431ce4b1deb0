#!/usr/bin/env bash
# Runs a benchmark through the test command and keeps a dated record of it in benches/runs/:
#   scripts/record-bench.sh NAME [VAR=VALUE ...] -- ARGS...
# writes benches/runs/YYYY-MM-DD-NAME.txt with the exact command, the commit, the machine, the
# load average before, every 20 s during and after the run, and the whole output. Example:
#   scripts/record-bench.sh apache-kafka-1m-100p-lesson LESSONPROBE_BENCH_BROKER=apache-kafka \
#     LESSONPROBE_BENCH_TABLE=lesson -- --bench replay
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/record-bench.sh NAME [VAR=VALUE ...] -- ARGS..." >&2; exit 2; }
name="$1"; shift
vars=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    *=*) vars+=("$1"); shift ;;
    *) echo "scripts/record-bench.sh: '$1' is not VAR=VALUE (the test command's arguments follow --)" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] || { echo "scripts/record-bench.sh: the test command's arguments must follow --" >&2; exit 2; }
shift
out="benches/runs/$(date -u +%F)-$name.txt"
[ ! -e "$out" ] || { echo "scripts/record-bench.sh: $out exists; choose another name" >&2; exit 2; }
command="${vars[*]:+${vars[*]} }bash scripts/test.sh $*"
{
  echo "# command (in the repository root, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', with uncommitted changes')):"
  echo "$command"
  echo "# started: $(date -u '+%F %T') UTC"
  echo "# nproc: $(nproc)"
  echo "# cpu: $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -n 1), memory $(awk '/MemTotal/ {printf "%d GiB", $2/1048576}' /proc/meminfo)"
  echo "# uptime before: $(uptime)"
  echo "# top processes by CPU before:"
  ps -eo pcpu,comm --sort=-pcpu | head -n 6 | sed 's/^/#   /'
  echo "# ---- output (standard output and standard error) ----"
} > "$out"
loads=$(mktemp)
( while sleep 20; do echo "#   $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done ) > "$loads" &
sampler=$!
# The sampler and its file go with this script, however it ends (a Ctrl-C included).
trap 'kill "$sampler" 2>/dev/null || true; rm -f "$loads"' EXIT
started=$(date +%s)
status=0
env "${vars[@]}" bash scripts/test.sh "$@" >> "$out" 2>&1 < /dev/null || status=$?
kill "$sampler" 2>/dev/null || true
{
  echo "# ---- end ----"
  echo "# exit status: $status; wall $(( $(date +%s) - started )) s"
  echo "# finished: $(date -u '+%F %T') UTC"
  echo "# uptime after: $(uptime)"
  echo "# load average (1, 5, 15 min) every 20 s during the run:"
  cat "$loads"
} >> "$out"
echo "$out"
exit "$status"
