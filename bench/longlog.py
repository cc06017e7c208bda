"""Section "longlog": a small commit's time by the length of its table's `_delta_log`, on a local
warehouse, with Delta's local log store and with the replicator's (issue 51).

Why: a follower commits each busy table once a step, every few seconds, and a log keeps 30 days of
commits (`delta.logRetentionDuration`), four files each on a local disk (the commit, its checksum
and their checksum twins): about 80,000 files a day at a step every 4 s, 2.6 million in 30 days. The long
follow (section 15) runs a few thousand steps, so its logs never get long enough to show what the
listing of such a log costs. This section writes the log ahead instead: a real table (checkpoints
every 100 commits, as the replicator's), its directory filled with `commits` commits (copies of a
real INSERT's commit, which replay to the same table, and their checksum and twin files), then a
checkpoint by a real commit, then small INSERTs timed. Each store runs in a process of its own (a
log store is chosen when the session starts): the replicator's, the replicator's listing the log
afresh at each of a statement's two looks (`replicator.log.reuseListing=false`), and Delta's own
through the `[spark]` pass-through (`spark.delta.logStore.file.impl`), as a user would set it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BenchConfig, log
from bench.procs import checkout_env

STORES = {"delta": "io.delta.storage.LocalLogStore", "relist": "replicator.s3commit.LocalListingLogStore",
          "replicator": "replicator.s3commit.LocalListingLogStore"}
SETTINGS = {"delta": {"spark.delta.logStore.file.impl": STORES["delta"]},
            "relist": {"spark.hadoop.replicator.log.reuseListing": "false"}}
COMMITS = (100, 2500, 10000)
INSERTS = 8  # timed after 2 more (warm-up)
WARM_UP = 2


def bench_longlog(cfg: BenchConfig, scratch: Path) -> dict[str, Any]:
    """Section "longlog": both stores over the same log lengths, each in its own process."""
    commits = (100, 1000) if cfg.quick else COMMITS
    out: dict[str, Any] = {"commits": list(commits), "inserts": INSERTS, "stores": {}}
    for store in STORES:
        where = scratch / f"longlog-{store}"
        cmd = [sys.executable, "-m", "bench.longlog", store, str(where), ",".join(map(str, commits))]
        log.info("longlog: %s's log store over logs of %s commits", store, ", ".join(map(str, commits)))
        done = subprocess.run(cmd, capture_output=True, text=True, env=checkout_env(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the longlog worker ({store}) exited {done.returncode}:\n{done.stderr[-3000:]}")
        out["stores"][store] = json.loads(done.stdout.strip().splitlines()[-1])
        shutil.rmtree(where, ignore_errors=True)
    return out


def _fill(log_dir: Path, upto: int) -> None:
    """Commits 2 .. `upto` - 1 as copies of commit 1, each with a checksum and the twins."""
    body = (log_dir / f"{1:020d}.json").read_bytes()
    for version in range(2, upto):
        (log_dir / f"{version:020d}.json").write_bytes(body)
        for name in (f"{version:020d}.crc", f".{version:020d}.json.crc", f".{version:020d}.crc.crc"):
            (log_dir / name).touch()


def _worker(store: str, where: Path, commits: list[int]) -> dict[str, Any]:
    from replicator.runtime.spark import get_spark
    from replicator.storage import StorageOptions, configure

    if store in SETTINGS:
        configure(StorageOptions(spark_conf=SETTINGS[store]))
    spark = get_spark("bench-longlog")
    used = spark.conf.get("spark.delta.logStore.file.impl", None)
    if used != STORES[store]:
        raise RuntimeError(f"the session's local log store is {used}, not {STORES[store]}")
    rows: list[dict[str, Any]] = []
    for n in commits:
        path = where / f"t{n}"
        ref = f"delta.`{path}`"
        spark.sql(f"CREATE TABLE {ref} (id BIGINT, v STRING) USING delta "
                  "TBLPROPERTIES ('delta.checkpointInterval' = '100')")
        spark.sql(f"INSERT INTO {ref} VALUES (0, 'a')")
        _fill(path / "_delta_log", n)
        spark.sql(f"INSERT INTO {ref} VALUES (1, 'b')")  # version n: a checkpoint, as a long log has
        times = []
        for i in range(WARM_UP + INSERTS):
            time.sleep(0.2)  # as between a follower's steps: the log directory settled
            started = time.perf_counter()
            spark.sql(f"INSERT INTO {ref} VALUES ({i + 2}, 'x')")
            times.append(time.perf_counter() - started)
        files = len(os.listdir(path / "_delta_log"))
        count = spark.sql(f"SELECT count(*) FROM {ref}").collect()[0][0]
        rows.append({"commits": n, "log_files": files, "insert_s": statistics.median(times[WARM_UP:]),
                     "rows": count})
        shutil.rmtree(path, ignore_errors=True)
    return {"store": used, "rows": rows}


def render_markdown(res: dict[str, Any]) -> str:
    stores = res["stores"]
    lines = ["## 16. A long `_delta_log`: a small commit's time by the log's length (local warehouse)", "",
             "A real table (a checkpoint every 100 commits) whose `_delta_log` was filled ahead with N commits "
             "(copies of a real INSERT's, with their checksum and twin files: 4 files a commit), then a "
             f"checkpoint by a real commit, then {res['inserts']} one-row INSERTs (after {WARM_UP}), median. Each "
             "log store in a Spark session of its own: Delta's local store (`io.delta.storage.LocalLogStore`, "
             "set through `[spark]`) and the replicator's (`LocalListingLogStore`), which hands a statement's "
             "first listing out again at its second look (analysis, then the transaction's start) while nothing "
             "was committed since; \"listing twice\" is the replicator's with that off "
             "(`replicator.log.reuseListing=false`). A follower commits a busy "
             "table every few seconds: about 20,000 commits a day at a step every 4 s, 650,000 in the 30 days a "
             "log keeps.", "",
             "| commits in the log | log files | Delta's store | ÷ first | the replicator's, listing twice | "
             "÷ first | the replicator's | ÷ first | Delta's ÷ the replicator's | listing twice ÷ once |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    delta, own = stores.get("delta", {}).get("rows", []), stores.get("replicator", {}).get("rows", [])
    twice = stores.get("relist", {}).get("rows", []) or own
    for d, t, r in zip(delta, twice, own, strict=False):
        lines.append(f"| {d['commits']:,} | {d['log_files']:,} | {d['insert_s']:.3f} s | "
                     f"{d['insert_s'] / delta[0]['insert_s']:.2f}x | {t['insert_s']:.3f} s | "
                     f"{t['insert_s'] / twice[0]['insert_s']:.2f}x | {r['insert_s']:.3f} s | "
                     f"{r['insert_s'] / own[0]['insert_s']:.2f}x | **{d['insert_s'] / r['insert_s']:.1f}x** | "
                     f"{t['insert_s'] / r['insert_s']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1], Path(sys.argv[2]), [int(n) for n in sys.argv[3].split(",")])))
