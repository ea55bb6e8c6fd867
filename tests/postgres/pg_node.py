"""A PostgresScheduler node in a process of its own, for the multi-process tests.

    python pg_node.py URL TABLE NODE_ID OUT_FILE

Each delivery appends ``<item id> <attempt>`` to OUT_FILE as it starts (one line, flushed: a
kill loses none), works 2 ms and returns. The node runs until it is killed or SIGTERMed (then
it closes cleanly).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from datetime import timedelta

from flowsched import PostgresScheduler, ScheduleItem


def main() -> None:
    url, table, node_id, out = sys.argv[1:5]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()
    with open(out, "a", buffering=1, encoding="utf-8") as sink:

        def handler(item: ScheduleItem, attempt: int) -> None:
            with lock:
                sink.write(f"{item.id} {attempt}\n")
                sink.flush()
            time.sleep(0.002)  # a little work: a kill lands mid-batch

        with PostgresScheduler(
            url,
            table=table,
            node_id=node_id,
            poll_interval=timedelta(milliseconds=200),
            lease=timedelta(seconds=2),
            workers=8,
            batch_size=50,
            pool_size=2,
        ) as scheduler:
            scheduler.register("count", handler)
            print("ready", flush=True)
            stop.wait()


if __name__ == "__main__":
    main()
