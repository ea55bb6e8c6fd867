#!/bin/bash
# rounds of floor, now (sync, async), base 6499bac (sync, async); fresh process each; nice -n 5
# usage: URL=... NOW=/work/main ROUNDS=5 EXTRA=--backlog bash pg_final.sh
cd "$(dirname "$0")/../.."  # the checkout
export FLOWSCHED_POSTGRES_URL=${URL:?}
C=("floor now" "flowsched now" "flowsched-async now" "flowsched base" "flowsched-async base")
N=${#C[@]}
for r in $(seq 0 $((${ROUNDS:-5} - 1))); do
  for k in $(seq 0 $((N - 1))); do
    set -- ${C[$(( (r + k) % N ))]}
    tree=${NOW:-$PWD}; [ "$2" = base ] && tree=${BASE:-/tmp/base-s6-6499bac}
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$(PYTHONPATH=$tree nice -n 5 .venv/bin/python bench/postgres_bench.py --one $1 $EXTRA 2>/dev/null | tail -1)
    echo "{\"round\": $r, \"contender\": \"$1\", \"tree\": \"$2\", \"load\": $load, \"at\": \"$(date -u +%H:%M:%S)\", \"out\": $out}"
  done
done
