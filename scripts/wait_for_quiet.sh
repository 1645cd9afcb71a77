#!/usr/bin/env bash
# Wait until the 1-minute load average is below a threshold before a CPU measurement (the
# development machine is shared). Polls every 30 s, gives up after a maximum wait and says so;
# prints the load average it measures at (log it beside the run).
#   scripts/wait_for_quiet.sh [THRESHOLD=1.0] [MAX_WAIT_S=600]
set -u
threshold=${1:-1.0}
max_wait_s=${2:-600}
waited=0
while :; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk -v l="$load" -v t="$threshold" 'BEGIN {exit !(l < t)}'; then
    echo "load1 $load < $threshold after ${waited} s: measuring"
    exit 0
  fi
  if [ "$waited" -ge "$max_wait_s" ]; then
    echo "load1 $load still >= $threshold after ${waited} s: measuring anyway (busy machine)"
    exit 0
  fi
  sleep 30
  waited=$((waited + 30))
done
