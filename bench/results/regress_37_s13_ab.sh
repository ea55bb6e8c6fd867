#!/bin/bash
# A/B against main 989defa (git archive at /tmp/base989): the MongoDB fire benches (sync,
# async), the cross-node wake-up (mongo_bench.cross_node, 1 run of 30 timers per process),
# in-memory schedule cost and flow throughput; alternating which side goes first, fresh
# process per run, nice -n 5, this tree's bench scripts on both sides, only PYTHONPATH
# differing. Usage: regress_37_s13_ab.sh ROUNDS "sync async wakeup memory" OUT.jsonl
source /tmp/env.sh
cd "$(dirname "$0")/../.."
ROUNDS=$1; NAMES=$2; OUT=$3
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="base now"; else order="now base"; fi
  for name in $NAMES; do
    for side in $order; do
      if [ "$side" = base ]; then tree=/tmp/base989; else tree=$PWD; fi
      case $name in
        sync|async) res=$(PYTHONPATH=$tree nice -n 5 .venv/bin/python bench/async_mongo_bench.py --child "$name" "$FLOWSCHED_MONGO_URI" 2>/dev/null | tail -1) ;;
        wakeup) res=$(cd bench && PYTHONPATH=$tree nice -n 5 ../.venv/bin/python -c "import json, os, mongo_bench as mb; mb.RUNS = 1; print(json.dumps(mb.cross_node(os.environ['FLOWSCHED_MONGO_URI'])))" 2>/dev/null | tail -1) ;;
        memory) s=$(cd bench && PYTHONPATH=$tree nice -n 5 ../.venv/bin/python memory_bench.py --schedule-cost flowsched 50000 0 2>/dev/null | tail -1)
                f=$(cd bench && PYTHONPATH=$tree nice -n 5 ../.venv/bin/python flow_bench.py --child flowsched 20000 1000 2>/dev/null | tail -1)
                res="{\"schedule_s\": ${s:-null}, \"flow\": ${f:-null}}" ;;
      esac
      echo "{\"round\": $r, \"side\": \"$side\", \"name\": \"$name\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"res\": ${res:-null}}" >> "$OUT"
    done
  done
done
