"""Section "objectstore": the same simulated stream (``--events`` row changes, 10 tables, 3
partitions, Craft unless ``--protocols`` is given) replicated by ``replicator run --until-caught-up``
(a subprocess) into a local warehouse and into an ``s3a://`` warehouse on a local S3-compatible
server (S3Proxy, ``replicator/sim/locals3.py``) that the section starts under its scratch
directory and stops at the end of the run. The runs alternate, local then s3, ``pairs`` times (2;
``--quick``: 1), each into a warehouse of its own, so that bursts of other load hit both targets;
the s3 subprocesses get the server's environment (``LocalS3.env()``: the AWS credentials and
region, ``REPLICATOR_S3_ENDPOINT``), as a user's run would.

Reported: row changes/s of each run and the best s3 rate over the best local one (target >= 0.6),
and where a run's time goes, from its JSON summary: its steps, the time spent writing the
replicator's own state (``state_write_s``: state.json and the step log, on the step's path), the
writer lease's renewals (``lease_renewals`` / ``lease_renew_s``: a background thread, off the
step's path) and the rest, Delta's side (the engine's wall time, the summary's ``elapsed_s``,
minus those two), per step. Every warehouse is checked against the simulator's expected tables
with the bench's own Spark session, pointed at the server for the check (`object_store_access`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bench.common import BenchConfig, log, run_args
from bench.e2e import produce_stream, run_replicator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TARGETS = ("local", "s3")
DELTA_STORE = "s3-delta-store"
"""A third run per pair (subprocess runs only): the s3a warehouse with Delta's own log store
(`S3SingleDriverLogStore`, exists-then-PUT) instead of the replicator's conditional one, and
`--s3-conditional-writes false`: what the fenced commits cost, side by side."""
DELTA_STORE_CONFIG = '[spark]\n"spark.delta.logStore.s3a.impl" = "io.delta.storage.S3SingleDriverLogStore"\n'

TARGET_RATIO = 0.6
"""The target: an s3a:// warehouse replicates at least this fraction of a local one's row changes/s."""

_JVM_CREDENTIALS = (("aws.accessKeyId", "AWS_ACCESS_KEY_ID"), ("aws.secretAccessKey", "AWS_SECRET_ACCESS_KEY"))


class S3Target(Protocol):
    """An S3-compatible server: `replicator.sim.locals3.LocalS3` (the bench's own) or the tests'
    `S3Server` fixture."""

    @property
    def endpoint(self) -> str: ...

    def env(self) -> dict[str, str]: ...

    def warehouse_url(self, prefix: str) -> str: ...


ObjectStoreRunner = Callable[[str, str, str, str, int, Path, S3Target | None], dict[str, Any]]
"""(bootstrap, topic, protocol, warehouse (a directory or an s3a:// URL), max_buffer_rows, workdir,
the server of an s3a:// warehouse or None) -> the run (`bench.e2e.run_replicator`'s figures)."""


@contextlib.contextmanager
def object_store_access(spark: SparkSession | None, server: S3Target) -> Iterator[None]:
    """This process on `server`'s store for the block, everything restored afterwards: the AWS
    environment and the storage options (the replicator's own S3 client), and, given a running
    Spark session, its s3a settings (`use_storage`) and the credentials as the JVM's system
    properties, which the AWS SDK's default chain reads first (the session's JVM started before
    the environment was set, so it does not see it)."""
    from replicator.storage import StorageOptions, configure, storage_options

    env = server.env()
    saved_env = {k: os.environ.get(k) for k in env}
    saved_props: dict[str, str | None] = {}
    saved_conf: dict[str, str | None] = {}
    os.environ.update(env)
    configure(StorageOptions.from_env())
    try:
        if spark is not None:
            from replicator.runtime.spark import use_storage

            system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
            for prop, var in _JVM_CREDENTIALS:
                saved_props[prop] = system.getProperty(prop)
                system.setProperty(prop, env[var])
            keys = [k.removeprefix("spark.hadoop.") for k in storage_options().s3a_conf()]
            saved_conf = {k: spark.conf.get(k, None) for k in keys}
            use_storage(spark)
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        configure(StorageOptions.from_env())
        if spark is not None:
            system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
            for prop, old in saved_props.items():
                if old is None:
                    system.clearProperty(prop)
                else:
                    system.setProperty(prop, old)
            for key, value in saved_conf.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)


def _subprocess(cfg: BenchConfig, extra: tuple[str, ...] = ()) -> ObjectStoreRunner:
    def run(bootstrap: str, topic: str, protocol: str, warehouse: str, max_buffer_rows: int, workdir: Path,
            server: S3Target | None) -> dict[str, Any]:
        tag = "-" + warehouse.rstrip("/").rsplit("/", 1)[-1]
        return run_replicator(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir,
                              extra=[*run_args(cfg), *extra],
                              env=server.env() if server is not None else None, log_tag=tag)

    return run


def cost_split(summary: dict[str, Any]) -> dict[str, Any]:
    """Where a run's engine time went, from its JSON summary: the replicator's own state writes
    (state.json + step log), the lease's renewals, and the rest (Delta's side: reading, MERGEs,
    commits, Spark start-up), each also per step."""
    steps = int(summary.get("steps", 0))
    engine = float(summary.get("elapsed_s", 0.0))
    state = float(summary.get("state_write_s", 0.0))
    lease = float(summary.get("lease_renew_s", 0.0))
    rest = max(engine - state - lease, 0.0)

    def per_step(x: float) -> float:
        return x / steps if steps else 0.0

    return {"steps": steps, "engine_s": engine, "state_write_s": state, "lease_renewals": int(
        summary.get("lease_renewals", 0)), "lease_renew_s": lease, "rest_s": rest,
        "state_write_per_step_s": per_step(state), "lease_renew_per_step_s": per_step(lease),
        "rest_per_step_s": per_step(rest)}


def bench_objectstore(cfg: BenchConfig, bootstrap: str, scratch: Path, server: S3Target,
                      runner: ObjectStoreRunner | None = None) -> dict[str, Any]:
    """Section "objectstore" (Spark-free part): per protocol, produce the stream once, then
    replicate it into local and s3a:// warehouses, alternating (see the module doc). `server`
    runs already (the section's registry entry starts it); `runner` is a subprocess unless given
    (the smoke test runs in-process)."""
    run = runner or _subprocess(cfg)
    runners = {"local": run, "s3": run}
    if runner is None:
        config = scratch / "delta-store.toml"
        config.write_text(DELTA_STORE_CONFIG)
        runners[DELTA_STORE] = _subprocess(cfg, ("--config", str(config), "--s3-conditional-writes", "false"))
    targets = tuple(runners)
    events = cfg.objectstore_events or cfg.events
    pairs = max(cfg.objectstore_pairs, 1)
    # Several steps per run (not the one step of the e2e section's buffer): what a step costs on
    # each store, state writes and commits included, is the point of the comparison.
    step_rows = max(1, min(cfg.max_buffer_rows, events // 5))
    out: dict[str, Any] = {"events": events, "tables": cfg.tables, "partitions": cfg.partitions, "pairs": pairs,
                           "max_buffer_rows": step_rows,
                           "endpoint": server.endpoint, "protocols": {}}
    for i, protocol in enumerate(cfg.objectstore_protocols):
        log.info("objectstore %s: simulating %d row changes into the broker", protocol, events)
        stream = produce_stream(dataclasses.replace(cfg, events=events), bootstrap, protocol, events,
                                cfg.seed + 300 + i)
        runs: list[dict[str, Any]] = []
        for pair in range(1, pairs + 1):
            for target in targets:
                name = f"objectstore-{protocol}-{target}-{pair}"
                on_s3 = target != "local"
                warehouse = server.warehouse_url(name) if on_s3 else str(scratch / f"wh-{name}")
                res = runners[target](bootstrap, stream["topic"], protocol, warehouse, step_rows, scratch,
                                      server if on_s3 else None)
                rate = int(stream["stats"]["row_changes"]) / res["wall_s"]
                costs = cost_split(res["summary"])
                log.info("objectstore %s %s #%d: %.1f s wall, %.0f row changes/s, %d steps, state writes %.0f ms/step, "
                         "Delta's side %.2f s/step", protocol, target, pair, res["wall_s"], rate, costs["steps"],
                         costs["state_write_per_step_s"] * 1000, costs["rest_per_step_s"])
                runs.append({"target": target, "pair": pair, "warehouse": warehouse, "run": res, "rows_per_s": rate,
                             "costs": costs})
        best = {t: max((r for r in runs if r["target"] == t), key=lambda r: float(r["rows_per_s"])) for t in targets}
        local = best["local"]["rows_per_s"]
        ratio = best["s3"]["rows_per_s"] / local if local else 0.0
        log.info("objectstore %s: s3 / local = %.2f (best of %d each)", protocol, ratio, pairs)
        out["protocols"][protocol] = {"stream": stream, "runs": runs, "ratio": ratio,
                                      "best": {t: best[t]["rows_per_s"] for t in targets}}
        if DELTA_STORE in best:
            plain = best[DELTA_STORE]["rows_per_s"] / local if local else 0.0
            out["protocols"][protocol]["ratio_delta_store"] = plain
            log.info("objectstore %s: with Delta's own log store s3 / local = %.2f", protocol, plain)
    return out


def finish_objectstore(spark: SparkSession, results: dict[str, Any], server: S3Target) -> None:
    """Section "objectstore" (Spark part): check every warehouse, local and s3a://, against the
    simulator's expected tables (the s3a:// ones with this process pointed at the server)."""
    from replicator.sim.simcheck import check_warehouse

    with object_store_access(spark, server):
        for protocol, res in results["protocols"].items():
            expected = res["stream"].pop("expected")
            for r in res["runs"]:
                diffs = check_warehouse(spark, r["warehouse"], expected)
                r["verified"] = not diffs
                r["diffs"] = diffs[:5]
                log.info("objectstore %s %s #%d: verified=%s", protocol, r["target"], r["pair"], r["verified"])
