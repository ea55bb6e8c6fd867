#!/bin/bash
# A/B of the MongoDB fire benches: main 989defa (git archive at /tmp/base989) against this
# tree, alternating which goes first, fresh process per run, nice -n 5, the same bench
# script (this tree's), only PYTHONPATH differing. Usage: ab.sh ROUNDS "sync async" OUT.jsonl
source /tmp/env.sh
cd "$(dirname "$0")/../.."
ROUNDS=$1; NAMES=$2; OUT=$3
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="base now"; else order="now base"; fi
  for name in $NAMES; do
    for side in $order; do
      if [ "$side" = base ]; then tree=/tmp/base989; else tree=$PWD; fi
      res=$(PYTHONPATH=$tree nice -n 5 .venv/bin/python bench/async_mongo_bench.py --child "$name" "$FLOWSCHED_MONGO_URI" 2>/dev/null | tail -1)
      echo "{\"round\": $r, \"side\": \"$side\", \"name\": \"$name\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"res\": ${res:-null}}" >> "$OUT"
    done
  done
done
