#!/bin/bash
cd /work/main; OUT=$2
for r in $(seq 1 $1); do
  if (( r % 2 )); then order="base now"; else order="now base"; fi
  for side in $order; do
    if [ $side = base ]; then tree=/tmp/base9710; else tree=/work/main; fi
    s=$(cd /work/main/bench && PYTHONPATH=$tree nice -n 5 ../.venv/bin/python memory_bench.py --schedule-cost flowsched 50000 0 2>/dev/null | tail -1)
    f=$(cd /work/main/bench && PYTHONPATH=$tree nice -n 5 ../.venv/bin/python flow_bench.py --child flowsched 20000 1000 2>/dev/null | tail -1)
    echo "{\"round\": $r, \"side\": \"$side\", \"schedule_s\": $s, \"flow\": $f}" >> $OUT
  done
done
