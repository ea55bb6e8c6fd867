#!/bin/bash
# A/B: base 9710b24 vs now, alternating, fresh process per run. Usage: ab.sh ROUNDS "contenders" OUT
source /tmp/env.sh
cd /work/main
ROUNDS=$1; NAMES=$2; OUT=$3
for r in $(seq 1 $ROUNDS); do
  if (( r % 2 )); then order="base now"; else order="now base"; fi
  for name in $NAMES; do
    for side in $order; do
      if [ $side = base ]; then tree=/tmp/base9710; else tree=/work/main; fi
      res=$(PYTHONPATH=$tree nice -n 5 .venv/bin/python bench/postgres_bench.py --one $name 2>/dev/null | tail -1)
      echo "{\"round\": $r, \"side\": \"$side\", \"name\": \"$name\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"res\": $res}" >> $OUT
    done
  done
done
