#!/bin/bash
# What the check before a start and the history cost the MongoDB firing path, beside main
# 989defa (git archive at /tmp/base989), same run: bench/promise_cost.py's variants of this
# tree and 989defa's sync/async contenders (this tree's bench scripts, only PYTHONPATH
# differing), a fresh process per run, the order rotated each round, nice -n 5.
# Usage: promise_cost.sh ROUNDS OUT.jsonl   (needs FLOWSCHED_MONGO_URI; SYNC_SIDES and
# ASYNC_SIDES, space-separated, choose the sides - empty: none; unset: every variant but
# bare-deep)
cd "$(dirname "$0")/../.."
ROUNDS=$1; OUT=$2
run() {  # face side
  if [ "$2" = base ]; then
    PYTHONPATH=/tmp/base989 nice -n 5 .venv/bin/python bench/async_mongo_bench.py --child "$1" "$FLOWSCHED_MONGO_URI" 2>/dev/null | tail -1
  else
    PYTHONPATH=$PWD nice -n 5 .venv/bin/python bench/promise_cost.py "$1" "$2" "$FLOWSCHED_MONGO_URI" 2>/dev/null | tail -1
  fi
}
for r in $(seq 1 "$ROUNDS"); do
  for face in sync async; do
    if [ $face = sync ]; then sides=(${SYNC_SIDES-base full no-confirm no-history neither bare})
    else sides=(${ASYNC_SIDES-base full no-history bare}); fi
    n=${#sides[@]}; (( n )) || continue
    k=$(( (r - 1) % n ))
    order=("${sides[@]:k}" "${sides[@]:0:k}")
    for side in "${order[@]}"; do
      res=$(run $face "$side")
      echo "{\"round\": $r, \"face\": \"$face\", \"side\": \"$side\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"res\": ${res:-null}}" >> "$OUT"
    done
  done
done
