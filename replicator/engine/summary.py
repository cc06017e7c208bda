"""What a run did: `RunSummary` (counts, watermark, errors) and its text and JSON renderings."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from replicator.codec.state import CodecState
from replicator.codec.values import InvalidText
from replicator.delta.session import CommitCounts
from replicator.engine.filtering import FilterCounts
from replicator.events import tso_physical_ms, tso_to_datetime


@dataclass
class TableCounts:
    """Per table: changes applied (one per key and step: upserts, deletes) and what they did to
    the Delta table (inserted, updated, deleted rows, as Delta's MERGE reports them)."""

    upserts: int = 0
    deletes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0


@dataclass
class RunSummary:
    source: str = ""
    records: int = 0
    events: int = 0
    rows: int = 0
    replays_dropped: int = 0
    already_applied: int = 0
    ddl_applied: int = 0
    ddl_skipped: int = 0
    dead_letters: int = 0
    steps: int = 0
    watermark: int = 0
    elapsed_s: float = 0.0
    tables: dict[str, TableCounts] = field(default_factory=dict)
    error: str | None = None
    invalid_text: InvalidText = field(default_factory=InvalidText)  # text decoded with U+FFFD
    # Simple's schema cache; row checksums verified / mismatched (dead-lettered as ChecksumError)
    codec_state: CodecState = field(default_factory=CodecState)
    # the warehouse's own costs: state.json + step log writes, the writer lease's renewals
    state_write_s: float = 0.0
    lease_renewals: int = 0
    lease_renew_s: float = 0.0
    # tables whose reader requirements a metadata-only schema change changed, and why (DdlOutcome)
    reader_changes: list[dict[str, Any]] = field(default_factory=list)
    # events of tables outside --include / --exclude, skipped, by reason (engine/filtering.py), and
    # with --shard those of other shards' tables (`other_shard`, engine/sharding.py)
    filtered: FilterCounts = field(default_factory=FilterCounts)
    # Delta write statements by kind (append, merge, ddl) with their Spark jobs and seconds, and
    # how many (step, table) writes were appends of fresh inserts or MERGEs (engine/merging.py)
    commits: CommitCounts = field(default_factory=CommitCounts)
    tables_appended: int = 0
    tables_merged: int = 0
    shard: str | None = None  # --shard I/N of the run; None: unsharded
    # tables compacted between steps, small files bin-packed, time spent (engine/compaction.py)
    compactions: int = 0
    compacted_files: int = 0
    compaction_s: float = 0.0
    # tables vacuumed between steps and the bytes removed (engine/compaction.py)
    vacuums: int = 0
    vacuumed_bytes: int = 0

    @property
    def invalid_utf8(self) -> int:
        """Text values that were not UTF-8 and were replicated with U+FFFD (see codec.values)."""
        return self.invalid_text.total

    @property
    def checksums_verified(self) -> int:
        return self.codec_state.checksums_verified

    @property
    def checksum_mismatches(self) -> int:
        return self.codec_state.checksum_mismatches

    @property
    def lag_s(self) -> float | None:
        if not self.watermark:
            return None
        return max(0.0, time.time() - tso_physical_ms(self.watermark) / 1000)

    def to_json(self) -> dict[str, Any]:
        out = {
            "source": self.source,
            "records": self.records,
            "events": self.events,
            "rows": self.rows,
            "replays_dropped": self.replays_dropped,
            "already_applied": self.already_applied,
            "ddl_applied": self.ddl_applied,
            "ddl_skipped": self.ddl_skipped,
            "dead_letters": self.dead_letters,
            "steps": self.steps,
            "watermark_tso": self.watermark,
            "watermark_time": tso_to_datetime(self.watermark).isoformat() if self.watermark else None,
            "lag_s": self.lag_s,
            "elapsed_s": round(self.elapsed_s, 3),
            "tables": {k: {"upserts": v.upserts, "deletes": v.deletes, "inserted": v.inserted, "updated": v.updated,
                           "deleted": v.deleted} for k, v in sorted(self.tables.items())},
            "error": self.error,
            "invalid_utf8": self.invalid_utf8,
            "checksums_verified": self.checksums_verified,
            "checksum_mismatches": self.checksum_mismatches,
            "state_write_s": round(self.state_write_s, 3),
            "lease_renewals": self.lease_renewals,
            "lease_renew_s": round(self.lease_renew_s, 3),
            "reader_changes": list(self.reader_changes),
            "filtered": self.filtered.to_json(),
            "commits": self.commits.to_json(),
            "tables_appended": self.tables_appended,
            "tables_merged": self.tables_merged,
            "compactions": self.compactions,
            "compacted_files": self.compacted_files,
            "compaction_s": round(self.compaction_s, 3),
            "vacuums": self.vacuums,
            "vacuumed_bytes": self.vacuumed_bytes,
        }
        if self.shard is not None:  # unsharded runs keep their shape
            out["shard"] = self.shard
        return out

    def render(self) -> str:
        wm = (f"{self.watermark} ({tso_to_datetime(self.watermark).isoformat()})" if self.watermark else "none yet")
        lines = [
            f"source            {self.source}" + (f"   shard {self.shard}" if self.shard is not None else ""),
            f"records read      {self.records}  (events {self.events}, rows {self.rows})",
            f"replays dropped   {self.replays_dropped}   already applied {self.already_applied}",
            f"DDL applied       {self.ddl_applied}   skipped {self.ddl_skipped}   dead letters {self.dead_letters}",
            f"watermark         {wm}",
            f"lag               {self.lag_s:.1f}s" if self.lag_s is not None else "lag               n/a",
            f"elapsed           {self.elapsed_s:.1f}s ({self.rows / max(self.elapsed_s, 1e-9):.0f} rows/s)",
        ]
        if self.checksums_verified or self.checksum_mismatches:
            lines.append(f"row checksums     {self.checksums_verified} verified, {self.checksum_mismatches} mismatched")
        if self.invalid_utf8:
            lines.append(f"invalid UTF-8     {self.invalid_utf8} text values replicated with U+FFFD")
        if self.tables_appended or self.tables_merged:
            lines.append(f"tables written      {self.tables_appended} appended, {self.tables_merged} merged (per step)")
        if self.compactions:
            lines.append(f"compacted         {self.compactions} tables, {self.compacted_files} small files, "
                         f"{self.compaction_s:.1f}s between steps")
        if self.vacuums:
            lines.append(f"vacuumed          {self.vacuums} tables, {self.vacuumed_bytes} bytes removed")
        for kind, k in self.commits.kinds.items():
            if k.count:
                lines.append(f"  {kind:<6} commits  {k.count} ({k.jobs / k.count:.1f} Spark jobs, "
                             f"{k.seconds / k.count:.2f} s each)")
        for name, c in sorted(self.tables.items()):
            lines.append(f"  {name}: {c.upserts} upserted, {c.deletes} deleted")
        for what, counts in (("rows", self.filtered.rows), ("DDLs", self.filtered.ddl)):
            if counts:
                lines.append(f"filtered {what:<8} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for rc in self.reader_changes:
            lines.append(f"reader change     {rc['table']}: {rc['feature']} ({rc['why']}); "
                         f"readers now {', '.join(rc['readers']) or 'none'}")
        return "\n".join(lines)
