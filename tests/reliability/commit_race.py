"""One side of the commit race (tests/reliability/test_fencing.py): a process with its own Spark
driver JVM writes commit files through the replicator's s3a commit store, round after round, at
the instants the test gives, and says which rounds it won.

    python -m tests.reliability.commit_race LOG_DIR NAME ROUNDS
    stdin: "START_EPOCH INTERVAL" once ready (it prints "ready"); stdout: one JSON line at the end.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any


def main() -> None:
    log_dir, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from replicator.runtime import jars
    from replicator.runtime.spark import get_spark

    jars.require("s3")
    spark = get_spark(f"commit-race-{name}")
    jvm: Any = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    store = jvm.replicator.s3commit.ConditionalS3LogStore(conf)
    path = jvm.org.apache.hadoop.fs.Path
    for i in range(30):  # warm up: the S3 client, the classes, the JIT; not part of the race
        warm = jvm.java.util.ArrayList()
        warm.add("{}")
        store.write(path(f"{log_dir}-warm-{name}/{i:020d}.json"), warm.iterator(), False, conf)
    print("ready", flush=True)
    start, interval = (float(x) for x in sys.stdin.readline().split())
    won: list[int] = []
    raced: list[str] = []
    other: list[str] = []
    lag = 0.0
    for i in range(rounds):
        # A few milliseconds of jitter each round: either side may be first, and often both at once.
        delay = start + i * interval + random.uniform(0.0, 0.02) - time.time()
        if delay > 0:
            time.sleep(delay)
        lag = max(lag, -delay)
        actions = jvm.java.util.ArrayList()
        actions.add(json.dumps({"commitInfo": {"writer": name, "round": i}}))
        try:
            store.write(path(f"{log_dir}/{i:020d}.json"), actions.iterator(), False, conf)
            won.append(i)
        except Exception as exc:
            (raced if "commit raced" in str(exc) else other).append(f"{i}: {str(exc)[:200]}")
    print(json.dumps({"name": name, "won": won, "raced": len(raced), "other": other, "lag": round(lag, 3)}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
