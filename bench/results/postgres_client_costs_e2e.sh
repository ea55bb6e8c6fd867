#!/bin/bash
# The end-to-end runs of postgres_client_costs.md: bench/postgres_cycle.py, main and the
# branch alternating (fresh process each), R rounds per face, on a server of our own:
#   PG_HOME=/tmp/s6c-pg PG_PORT=54421 bash tools/start-postgres.sh
#   bash bench/results/postgres_client_costs_e2e.sh 3 "sync async floor"
R=${1:-3}; FACES=${2:-"sync async"}
export FLOWSCHED_POSTGRES_URL=postgresql://flowsched@127.0.0.1:54421/flowsched
OUT=/tmp/pgcc_e2e_$(date +%H%M%S).txt
for i in $(seq $R); do for f in $FACES; do for t in main branch; do [ "$f" = floor ] && [ $t = branch ] && continue;
  if [ $t = main ]; then P=/work/main; else P=${BRANCH:-$PWD}; fi
  res=$(cd ${BRANCH:-$PWD} && PYTHONPATH=$P nice -n 5 /work/main/.venv/bin/python bench/postgres_cycle.py --face $f 2>&1)
  echo "$t $f $(echo "$res" | head -1)" >> $OUT
  echo "$t $f cycle: $(echo "$res" | tail -1)" >> $OUT.cycles
done; done; done
python3 - $OUT <<'PY'
import json, sys, statistics
rows = [l.split(" ", 2) for l in open(sys.argv[1])]
for f in ("sync", "async", "floor"):
    for t in ("main", "branch"):
        ds = [json.loads(r[2]) for r in rows if r[0] == t and r[1] == f]
        if not ds: continue
        m = lambda k: statistics.median(d[k] for d in ds)
        print(f"{f:5s} {t:6s} fired_per_s {m('fired_per_s'):8.0f} {sorted(round(d['fired_per_s']) for d in ds)}  client_us_per_timer {m('client_us_per_timer'):5.1f} {sorted(round(d['client_us_per_timer'],1) for d in ds)}  p99_ms {m('p99_ms'):6.1f}  server_us {m('server_us_per_timer'):5.1f}")
PY
echo $OUT
