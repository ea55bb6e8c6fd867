import json, sys, statistics
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by={}
for r in rows:
    by.setdefault(r['round'],{})[(r['contender'],r['tree'])]=r['out']
keys=sorted({k for d in by.values() for k in d})
for k in keys:
    ratios=[d[k]['fired_per_s']/d[("floor","now")]['fired_per_s'] for d in by.values() if k in d and ("floor","now") in d]
    p99=[d[k].get('p99_ms') for d in by.values() if k in d]
    st=[d[k].get('statements_per_timer') for d in by.values() if k in d]
    print(k, 'ratio med %.2f' % statistics.median(ratios), [round(x,2) for x in ratios], 'p99 med', round(statistics.median([p for p in p99 if p is not None] or [0]),1), [round(p or 0) for p in p99], 'stmts', round(statistics.median(st),4))
