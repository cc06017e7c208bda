"""The loop's `Applier` over a warehouse: a step's MERGEs and DDLs applied, then its progress committed."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replicator.delta.typemap import spec_from_row
from replicator.engine.codecstate import keep_codec_state
from replicator.engine.compaction import Compactor
from replicator.engine.context import RunContext
from replicator.engine.ddlstep import DdlSteps
from replicator.engine.deadletters import DeadLetters
from replicator.engine.merging import Job, SegmentMerger, check_columns
from replicator.engine.plan import Segment, plan_step
from replicator.engine.rows import first_ts as rows_first_ts
from replicator.engine.rows import on_driver, sample
from replicator.engine.schedule import run_plan
from replicator.engine.summary import TableCounts
from replicator.engine.window import Step
from replicator.errors import LeaseLostError
from replicator.events import Record, RowChange
from replicator.faults import fault_point
from replicator.maintenance import Maintainer, MaintainOptions
from replicator.progress import Progress
from replicator.warehouse import TableEntry, table_uid

if TYPE_CHECKING:
    from replicator.delta.catalog import CatalogSync
    from replicator.delta.writer import MergeResult, TableWriter

log = logging.getLogger("replicator")

# Protocols whose messages name the operation, so an INSERT is an insert (engine/merging.py): the
# Open Protocol and Craft write an update without old values exactly like an insert.
NAMES_INSERTS = ("canal-json", "simple", "csv")
# How often a run rolls up its step log's old steps (a read of the log's old part, and where the
# store appends in place a rewrite of the file): about an hour of a busy follower's steps.
ROLL_EVERY_STEPS = 1000


class WarehouseApplier:
    """The loop's `Applier`: steps become Delta MERGEs / DDL changes, progress goes to state.json
    (with one windows.jsonl line per step), undecodable messages to the dead-letter table.

    Its parts: the Spark side (spark_edge.py), one segment's MERGE (merging.py), a step's DDLs
    (ddlstep.py), dead letters (deadletters.py); the order of a step is engine/plan.py's, run by
    engine/schedule.py."""

    def __init__(self, ctx: RunContext) -> None:
        self.warehouse = ctx.warehouse
        self.metrics = ctx.metrics
        self._apply_s = 0.0  # the last step's apply time (its metrics are counted once it is committed)
        self.after_commit = ctx.after_commit  # the engine updates its gauges (loop thread)
        self.options = options = ctx.options
        self.summary = ctx.summary
        self.source_name = ctx.source_name
        self.state = ctx.state  # loaded by the engine under the warehouse's lease
        self.edge = ctx.edge
        self.shard = ctx.shard  # --shard: other shards' rows not dropped when decoded
        self.catalog_config = ctx.catalog  # where tables are registered by name
        self.dead_letters = DeadLetters(self.edge, self.warehouse, options.protocol, self.metrics, ctx.source_name,
                                        on_ddl_skipped=self.merge_only)
        self.merger = SegmentMerger(self.edge, self.metrics)
        self.ddls = DdlSteps(self.edge, self.warehouse, options, ctx.summary, self.metrics, self.dead_letters,
                             self.merger.written)
        self._catalog: CatalogSync | None = None
        self._catalog_synced = False  # the whole catalog checked once this run
        # A follower compacts and vacuums the tables it writes, between steps (engine/compaction.py).
        sizes = MaintainOptions(target_file_bytes=options.target_file_bytes, min_small_files=options.min_small_files,
                                retention_hours=options.retention_hours)
        compacts = options.compaction if options.compaction is not None else not options.until_caught_up
        self.compactor = Compactor(lambda: Maintainer(self.delta, sizes), sizes, vacuumed=lambda: self.state.vacuumed,
                                   compacted=lambda: self.state.compacted, metrics=self.metrics) if compacts else None

    # -- the Spark side (spark_edge.py) -----------------------------------------------------------
    @property
    def delta(self) -> TableWriter:
        return self.edge.delta

    def warm_up(self) -> None:
        self.edge.warm_up()

    def close(self) -> None:
        self.edge.close()

    @property
    def ddl_dead_letters(self) -> int:
        return self.dead_letters.ddls

    # -- the catalog ------------------------------------------------------------------------------
    @property
    def catalog(self) -> CatalogSync | None:
        """The registrations' keeper when a catalog is configured (on the main Spark session)."""
        if self.catalog_config is None:
            return None
        if self._catalog is None:
            from replicator.delta.catalog import CatalogSync

            self._catalog = CatalogSync(self.delta.spark, self.catalog_config, self.warehouse.root,
                                        sharded=self.warehouse.shard is not None, epoch=self.warehouse.epoch,
                                        lease=self.warehouse.lease_path.path, holds_lease=self._holds_lease)
        return self._catalog

    def _holds_lease(self) -> bool:
        lease = self.warehouse.lease
        return lease is not None and lease.holds_record()

    def sync_catalog_once(self) -> None:
        """Check every registration once a run (before its first step, or at its end when it had
        none): what a crash left half done, or a name dropped by hand, is repaired."""
        catalog = self.catalog
        if catalog is not None and not self._catalog_synced:
            catalog.sync(self.state)
            self._catalog_synced = True

    def _sync_catalog(self, step: Step) -> None:
        """At the end of a step, before its progress is committed: the names it created, renamed,
        dropped or recovered (any DDL step: CREATE/DROP DATABASE too), and now and then the rest."""
        catalog = self.catalog
        touched, self.ddls.touched = self.ddls.touched, set()
        if catalog is not None and (touched or step.ddls or catalog.due()):
            catalog.sync(self.state, touched)

    # -- Applier --------------------------------------------------------------------------------
    def save_progress(self, progress: Progress, record: dict[str, Any] | None) -> None:
        state = self.state
        state.progress = progress
        keep_codec_state(self.summary.codec_state, state)
        if self.shard is not None:
            state.shard_renames = self.shard.identities.to_json()
        if record is not None:
            state.steps = record["step"]
            self.warehouse.log_step(record)
        self.warehouse.save_state(state)
        if record is not None:
            self.metrics.step(str(record.get("kind", "window")), self._apply_s)
            if record["step"] % ROLL_EVERY_STEPS == 0:
                self._roll_step_log()
        self.after_commit()
        if record is not None and self.compactor is not None:
            tables = self.state.tables
            self.compactor.wrote((e.path, f"{e.schema_name}.{e.table}", uid) for uid in record.get("tables", {})
                                 if (e := tables.get(uid)) is not None and e.status == "live")
            vacuums = self.compactor.vacuums
            self.compactor.between_steps()
            if self.compactor.vacuums != vacuums:  # when it was vacuumed survives a restart at once
                self.warehouse.save_state(state)
            s, c = self.summary, self.compactor
            s.compactions, s.compacted_files, s.compaction_s = c.compacted, c.files_compacted, c.seconds
            s.vacuums, s.vacuumed_bytes = c.vacuums, c.vacuumed_bytes
            for marks in (state.vacuumed, state.compacted):  # kept for live tables only: bounded by them
                for uid in [u for u in marks if (e := tables.get(u)) is None or e.status != "live"]:
                    del marks[uid]

    def _roll_step_log(self) -> None:
        """Keep the step log bounded (warehouse/store.py `roll_step_log`); a failure to is not the
        step's: it is logged and tried again ROLL_EVERY_STEPS steps later."""
        try:
            folded = self.warehouse.roll_step_log(dt.timedelta(hours=self.options.retention_hours))
        except LeaseLostError:
            raise
        except Exception as exc:
            log.warning("could not roll up the step log at %s: %s; retried later", self.warehouse.steps.location, exc)
            return
        if folded:
            log.info("step log: %d steps older than the retention rolled up", folded)


    def dead_letter(self, dead: Sequence[tuple[Record, str]]) -> None:
        self.dead_letters.messages(dead)
        if dead and self.options.on_error == "skip":
            rec = dead[0][0]
            self.merge_only(f"a message was skipped (--on-error skip) at topic {rec.topic!r} partition "
                            f"{rec.partition} offset {rec.offset}")

    def apply(self, step: Step) -> dict[str, Any]:
        """Apply one step: its tables' MERGEs concurrently (`apply_parallelism`), each DDL once the
        rows of its tables before it are in, one DDL at a time (engine/plan.py, engine/schedule.py)."""
        started = time.monotonic()
        if self.shard is not None:
            step = self.shard.step(step)
        try:
            return self._apply(step)
        finally:
            self._apply_s = time.monotonic() - started

    def _apply(self, step: Step) -> dict[str, Any]:
        from replicator.delta.ddl.scope import ddl_scope

        state = self.state
        self.sync_catalog_once()
        self.ddls.touched.clear()
        record: dict[str, Any] = {"step": state.steps + 1, "hi": step.hi, "tables": {},
                                  "recorded_at": dt.datetime.now(dt.UTC).isoformat(),
                                  "kind": "ddl" if step.ddls else "window"}
        if self.shard is not None:
            first = first_ts(step)
            if first is not None:  # where its changes start: a consistent view across shards reads it
                record["lo"] = first
        self.summary.commits = self.delta.commits  # the statements' kinds, jobs, seconds (shared by sessions)
        if step.ddls and state.inflight_hi < step.hi:
            # A crash from here on may leave a table's Delta schema ahead of the catalog (the re-run
            # skips each write its table already holds before planning it: merging.py).
            state.inflight_hi = step.hi
            self.warehouse.save_state(state)
        plan = plan_step(step.hi, step.rows, step.ddls, ddl_scope)
        self.ddls.create_ahead(state, plan)
        write = StepWrite(self, step, record, self._inserts_policy())
        run_plan(plan, prepare=write.prepare, run=self.merger.merge, apply_ddl=write.apply_ddl, done=write.done,
                 executor=self.edge.executor)
        write.finish()
        self._sync_catalog(step)
        return record

    def _inserts_policy(self) -> str:
        """How this step's INSERTs count for appending fresh keys (merging.py, `Job.inserts`)."""
        mode, state = self.options.fresh_inserts, self.state
        if mode == "merge" or (state.merge_only and mode != "append"):
            return "off"
        if mode == "append":
            return "forced"
        if state.pre_images or self.options.protocol in NAMES_INSERTS:
            return "trusted"
        return "proof"

    def merge_only(self, why: str) -> None:
        """Stop appending fresh inserts to this warehouse, for good (`State.merge_only`): `why`
        may have lost a delete, so a key that looks new may be in its table already."""
        if not self.state.merge_only and self.options.fresh_inserts != "merge":
            self.state.merge_only = why
            log.warning("%s: from now on every table of this warehouse is written with MERGE, never appended "
                        "(a delete may be missing, so a key that looks new may already be there); "
                        "--fresh-inserts append turns appending back on", why)

    def infer_table(self, schema: str, table: str, rows: Sequence[RowChange]) -> TableEntry:
        """A table the stream never created, from its rows' columns (registered in the state)."""
        state = self.state
        first = next((r for r in rows if r.columns), rows[0])
        spec = spec_from_row(first)
        uid = table_uid(schema, table + "\x00inferred", state.applied_ts)
        path = self.warehouse.new_table_path(schema, table, uid)
        self.delta.create_table(path, spec)
        entry = TableEntry(uid=uid, schema=schema, table=table, path=path, spec=spec.to_json(), created_ts=0)
        state.tables[uid] = entry
        self.ddls.touched.add(uid)
        log.info("table %s.%s was not created in the stream: inferred from row events (key %s)",
                 schema, table, list(spec.key), extra={"table": f"{schema}.{table}"})
        return entry


class StepWrite:
    """One step's writes, as `run_plan` (schedule.py) runs them: each segment resolved against
    the catalog (`prepare`), each DDL applied (`apply_ddl`), each write counted into the step's
    record as it finishes (`done`), then the record completed (`finish`)."""

    def __init__(self, applier: WarehouseApplier, step: Step, record: dict[str, Any], inserts: str) -> None:
        self.applier = applier
        self.step = step
        self.record = record
        self.n = record["step"]
        self.inserts = inserts  # how its INSERTs count (merging.py, `Job.inserts`)
        self.writes: dict[str, set[str]] = {}  # per table uid: the kinds of its writes
        self.versions: dict[str, int] = {}  # per table uid: the Delta version the step left it at
        self.ddls: list[dict[str, Any]] = []

    def prepare(self, seg: Segment) -> Job:
        """The segment's table, as the catalog holds it now (after every DDL it waits for)."""
        ap, n, inserts = self.applier, self.n, self.inserts
        schema, table = seg.table
        entry = ap.state.live_table(schema, table)
        driver = on_driver(seg.rows)
        if driver is None and entry is not None and entry.table_spec.key:
            return Job(seg, entry, entry.table_spec, n, inserts)  # nothing to learn from a span's rows
        rows = sample(seg.rows, seg.table)  # a span's first few: what the catalog needs from rows
        if not rows:
            return Job(seg, None, None, n, inserts)  # the span turned out empty
        if entry is None:
            entry = ap.infer_table(schema, table, rows)
        spec = entry.table_spec
        if not spec.key:  # DROP PRIMARY KEY cleared it: TiCDC flags its fallback handle key in the rows
            from replicator.delta.ddl import adopt_handle_key

            spec = adopt_handle_key(entry, rows)
        if driver is not None:  # the executors check every row of a span
            check_columns(entry, driver)
        return Job(seg, entry, spec, n, inserts)

    def apply_ddl(self, i: int) -> None:
        self.ddls.append(self.applier.ddls.apply(self.applier.state, self.step.ddls[i], self.versions))

    def done(self, seg: Segment, out: tuple[Job, MergeResult], more: bool) -> None:
        """A segment's write finished: counted in the run's summary, metrics and the step's record."""
        job, res = out
        if more:
            fault_point("between_tables")
        if job.entry is None:
            return
        ap = self.applier
        name = f"{seg.table[0]}.{seg.table[1]}"
        counts = ap.summary.tables.setdefault(name, TableCounts())
        if not res.skipped:
            counts.upserts += res.upserts
            counts.deletes += res.deletes
            counts.inserted += res.inserted
            counts.updated += res.updated
            counts.deleted += res.deleted
        ap.metrics.merged(name, inserted=res.inserted, updated=res.updated, deleted=res.deleted,
                          committed=not res.skipped and res.kind != "none", appended=res.kind == "append")
        if res.pre_images and not ap.state.pre_images:
            ap.state.pre_images = True  # saved with the step's progress
            log.info("the stream carries old values (an update with its pre-image in %s): its inserts are "
                     "appended when a table's step holds only new keys", name)
        uid = job.entry.uid
        self.writes.setdefault(uid, set()).add(res.kind)
        prev = self.record["tables"].get(uid) or {"upserts": 0, "deletes": 0}
        version = max(res.version, self.versions.get(uid, -1))
        self.record["tables"][uid] = table_record(job.entry, version, prev["upserts"] + res.upserts,
                                                  prev["deletes"] + res.deletes)
        self.versions[uid] = version

    def finish(self) -> None:
        """The tables only DDLs wrote, and how each table was written (append or MERGE)."""
        record, ap = self.record, self.applier
        for uid, version in self.versions.items():
            entry = ap.state.tables.get(uid)
            if uid not in record["tables"] and entry is not None and entry.status == "live":
                record["tables"][uid] = table_record(entry, version, 0, 0)
        appended = merged = 0
        for uid, kinds in self.writes.items():
            if "merge" in kinds:
                merged += 1
                record["tables"][uid]["write"] = "merge"
            elif kinds & {"append", "insert"}:
                appended += 1
                record["tables"][uid]["write"] = "append"
        record["appended"], record["merged"] = appended, merged
        ap.summary.tables_appended += appended
        ap.summary.tables_merged += merged
        if self.ddls:
            record["ddls"] = self.ddls
            record["ddl"] = self.ddls[0]  # the step log's shape before steps held several DDLs


def table_record(entry: TableEntry, version: int, upserts: int, deletes: int) -> dict[str, Any]:
    """A table's entry in the step log's record of a step."""
    return {"schema": entry.schema_name, "table": entry.table, "version": version,
            "upserts": upserts, "deletes": deletes}


def first_ts(step: Step) -> int | None:
    """The smallest commit ts of a step's rows and DDLs (its rows are in commit-ts order per table),
    None when it holds none: the table versions of the step before it held every ts below it
    (delta/shardview.py)."""
    firsts = [t for rows in step.rows.values() if (t := rows_first_ts(rows)) is not None]
    firsts += [d.commit_ts for d in step.ddls]
    return min(firsts) if firsts else None
