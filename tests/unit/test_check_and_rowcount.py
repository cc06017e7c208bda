"""The pure parts of `replicator check` (the result and its report) and `replicator tables` (row
counts from a hand-written `_delta_log`, the tab-separated output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.cli.check import SHOWN_DIFFERENCES, count_by_table, evaluate, render
from replicator.cli.tables import TSV_COLUMNS, tsv_lines
from replicator.delta.rowcount import Inexact, count_rows, file_bytes, log_version, read_snapshot
from replicator.sim.expected import ExpectedState
from replicator.sim.simcheck import ActualTable
from replicator.storage import Location
from replicator.storage.local import LocalFileIO
from replicator.views.listing import ListedTable

SCHEMA = {"key": ["id"], "columns": [["id", "INT"], ["v", "VARCHAR(10)"]]}
TYPES = {"id": "INT", "v": "STRING"}


def _expected(rows: int = 3, watermark: int = 100) -> ExpectedState:
    return ExpectedState(tables={"s.t": [{"id": i, "v": f"v{i}"} for i in range(rows)], "s.u": []},
                         schemas={"s.t": SCHEMA, "s.u": SCHEMA}, watermark=watermark, generator={}, stats={})


def _actual(rows: list[dict[str, Any]]) -> dict[str, ActualTable]:
    return {"s.t": ActualTable(rows, ["id"], TYPES), "s.u": ActualTable([], ["id"], TYPES)}


def test_an_equal_warehouse_is_one_line() -> None:
    result = evaluate(_expected(), _actual([{"id": i, "v": f"v{i}"} for i in range(3)]), applied_ts=100)
    assert result.ok and (result.tables, result.rows, result.warehouse_tables, result.warehouse_rows) == (2, 3, 2, 3)
    assert render(result, "/wh", "truth.json") == ["warehouse /wh matches truth.json: 2 tables, 3 rows compared"]
    assert result.to_json() == {"ok": True, "tables": 2, "rows": 3, "warehouse_tables": 2, "warehouse_rows": 3,
                                "differences": [], "differences_total": 0}


def test_differences_name_table_key_and_column_and_are_bounded() -> None:
    rows = [{"id": 0, "v": "v0"}, {"id": 1, "v": "changed"}]  # id 2 missing, id 1 changed
    result = evaluate(_expected(), _actual(rows), applied_ts=99)
    assert not result.ok
    assert result.differences[0].startswith("warehouse applied watermark 99 is behind")
    assert "s.t: missing row id=2" in result.differences
    assert "s.t: row id=1 column v: expected 'v1', warehouse 'changed'" in result.differences
    assert result.by_table == {"": 1, "s.t": 2}
    lines = render(result, "/wh", "truth.json")
    assert lines[0] == "warehouse /wh differs from truth.json: 3 differences (s.t: 2, watermark: 1)"
    assert lines[1] == "  expected 2 tables, 3 rows; the warehouse has 2 tables, 2 rows"
    assert len(lines) == 5 and "more" not in lines[-1]

    many = evaluate(_expected(rows=50), _actual([]), applied_ts=100)  # every row missing: 50 differences
    assert len(many.differences) == 50, "not cut per table: the report bounds them"
    lines = render(many, "/wh", "truth.json")
    assert len(lines) == 2 + SHOWN_DIFFERENCES + 1
    assert lines[-1] == "  ... and 30 more differences (--json lists up to 1000)"
    doc = many.to_json(limit=10)
    assert json.loads(json.dumps(doc))["differences_total"] == 50 and len(doc["differences"]) == 10


def test_differences_by_table_takes_the_longest_name() -> None:
    diffs = ["a: x", "a: b: y", "a: b: z", "watermark behind"]
    assert count_by_table(diffs, ["a", "a: b"]) == {"a": 1, "a: b": 2, "": 1}


def test_tables_tsv_keeps_whole_values_and_escapes_separators() -> None:
    long_path = "s3a://bucket/" + "deep/" * 40 + "orders-0123456789ab"
    rows = [ListedTable("shop", "orders", long_path, ("id", "region"), "kafka", 0, rows=12345,
                        reader_features=("columnMapping", "deletionVectors"), catalog="dw_shop.orders"),
            ListedTable("odd\tschema", "line\nbreak", "/wh/t", ("k",), "binlog", None, 6)]
    lines = tsv_lines(rows)
    assert lines[0].split("\t") == list(TSV_COLUMNS)
    assert lines[1].split("\t") == ["shop", "orders", "12345", "id,region", "0 (-)",
                                    "columnMapping,deletionVectors", long_path, "kafka", "dw_shop.orders"]
    assert lines[2].split("\t") == ["odd\\tschema", "line\\nbreak", "-", "k", "commit #6", "-", "/wh/t", "binlog",
                                    "-"]
    assert rows[0].to_json()["rows"] == 12345 and "rows" not in rows[1].to_json()
    assert rows[0].to_json()["catalog"] == "dw_shop.orders" and rows[1].to_json()["catalog"] is None


# -- row counts from the log ------------------------------------------------------------------------

def _add(path: str, records: int | None, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    stats = json.dumps({"numRecords": records, "minValues": {}}) if records is not None else None
    return {"add": {"path": path, "size": 1, "modificationTime": 0, "dataChange": True, "stats": stats,
                    "deletionVector": dv}}


def _remove(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"remove": {"path": path, "deletionTimestamp": 0, "dataChange": True, "deletionVector": dv}}


def _commit(log: Path, version: int, *actions: dict[str, Any]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"operation": "WRITE"}}, *actions]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def _dv(cardinality: int, name: str) -> dict[str, Any]:
    return {"storageType": "u", "pathOrInlineDv": name, "offset": 1, "sizeInBytes": 10, "cardinality": cardinality}


def test_row_count_replays_adds_removes_and_deletion_vectors(tmp_path: Path) -> None:
    table = tmp_path / "t"
    log = table / "_delta_log"
    assert count_rows(table) is None, "no log: no table"
    _commit(log, 0, {"protocol": {"minReaderVersion": 1}}, _add("a.parquet", 10), _add("b.parquet", 5))
    assert count_rows(table) == 15
    _commit(log, 1, _remove("a.parquet"), _add("c.parquet", 7))  # an UPDATE rewriting a
    # a DELETE of 2 rows of b through a deletion vector: remove and add of the same path, in either order
    _commit(log, 2, _add("b.parquet", 5, _dv(2, "dv1")), _remove("b.parquet"))
    assert count_rows(table) == 7 + 3
    _commit(log, 3, _remove("b.parquet", _dv(2, "dv1")), _add("b.parquet", 5, _dv(4, "dv2")))
    assert count_rows(table) == 7 + 1


def test_row_count_starts_at_the_latest_complete_checkpoint(tmp_path: Path) -> None:
    table = tmp_path / "t"
    log = table / "_delta_log"
    _commit(log, 0, _add("old.parquet", 1000))  # superseded by the checkpoint below
    add_type = pa.struct([("path", pa.string()), ("stats", pa.string()),
                          ("deletionVector", pa.struct([("storageType", pa.string()),
                                                        ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                                                        ("cardinality", pa.int64())]))])
    adds = [{"path": "x.parquet", "stats": json.dumps({"numRecords": 4}), "deletionVector": None},
            {"path": "y.parquet", "stats": json.dumps({"numRecords": 6}),
             "deletionVector": {"storageType": "u", "pathOrInlineDv": "d", "offset": 1, "cardinality": 1}},
            None]
    remove_type = pa.struct([("path", pa.string())])
    pq.write_table(pa.table({"add": pa.array(adds, add_type),
                             "remove": pa.array([None, None, {"path": "old.parquet"}], remove_type)}),
                   log / f"{1:020d}.checkpoint.parquet")
    _commit(log, 1, _remove("old.parquet"), _add("x.parquet", 4), _add("y.parquet", 6, _dv(1, "d")))
    _commit(log, 2, _remove("x.parquet"))
    # an incomplete multi-part checkpoint at version 2 is not used
    pq.write_table(pa.table({"add": pa.array([None], add_type)}),
                   log / f"{2:020d}.checkpoint.0000000001.0000000002.parquet")
    assert count_rows(table) == 5


def test_row_count_is_inexact_without_record_counts_or_with_a_gap(tmp_path: Path) -> None:
    table = tmp_path / "t"
    log = table / "_delta_log"
    _commit(log, 0, _add("a.parquet", None))
    with pytest.raises(Inexact, match="numRecords"):
        count_rows(table)
    _commit(log, 0, _add("a.parquet", 3))
    _commit(log, 2, _add("b.parquet", 3))
    with pytest.raises(Inexact, match="gap"):
        count_rows(table)


def test_row_count_and_reader_features_read_line_separators_inside_strings(tmp_path: Path) -> None:
    """Delta's JSON writer leaves U+2028, U+2029 and U+0085 raw inside strings (a text column's
    min/max stats, a comment): only "\\n" ends an action."""
    from replicator.delta.features import reader_features

    table = tmp_path / "t"
    log = table / "_delta_log"
    stats = json.dumps({"numRecords": 4, "minValues": {"note": "a\u2028b\u2029c\x85d\x1ce"}}, ensure_ascii=False)
    add = {"add": {"path": "a.parquet", "size": 1, "modificationTime": 0, "dataChange": True, "stats": stats}}
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors"]}}
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a, ensure_ascii=False) for a in (add, protocol)) + "\n")
    assert "\u2028" in (log / f"{0:020d}.json").read_text()
    assert count_rows(table) == 4
    assert reader_features(table) == ["deletionVectors"]


class _Listed(LocalFileIO):
    """The local store, recording what each listing asked for."""

    def __init__(self) -> None:
        self.listings: list[str | None] = []  # None: the whole directory; else the first name asked

    def children(self, path: str) -> list[str]:
        self.listings.append(None)
        return super().children(path)

    def children_from(self, path: str, first: str) -> list[str]:
        self.listings.append(first)
        return [n for n in super().children(path) if n >= first]


def _checkpoint(log: Path, version: int, *paths: str) -> None:
    add_type = pa.struct([("path", pa.string()), ("size", pa.int64()), ("stats", pa.string())])
    adds = [{"path": p, "size": 1, "stats": json.dumps({"numRecords": 2})} for p in paths]
    pq.write_table(pa.table({"add": pa.array(adds, add_type)}), log / f"{version:020d}.checkpoint.parquet")


def test_the_log_is_listed_from_its_last_checkpoint(tmp_path: Path) -> None:
    """A log keeps a month of commits: a snapshot lists from the version `_last_checkpoint` names
    (one store listing from there), and lists it whole only when that checkpoint is not there."""
    table = tmp_path / "t"
    log = table / "_delta_log"
    for v in range(6):
        _commit(log, v, _add(f"f{v}.parquet", 2))
    _checkpoint(log, 3, "f0.parquet", "f1.parquet", "f2.parquet", "f3.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 3, "size": 4}))
    for v in range(3):  # the log's retention removed the commits before the checkpoint
        (log / f"{v:020d}.json").unlink()
    io = _Listed()
    where = Location(io, str(table))
    snap = read_snapshot(where)
    assert snap is not None and (snap.version, snap.rows) == (5, 12)
    assert log_version(where) == 5
    assert io.listings == [f"{3:020d}"] * 2

    # a hint whose checkpoint is not there (written, then lost): the whole log, still exact
    (log / f"{3:020d}.checkpoint.parquet").unlink()
    _commit(log, 0, _add("f0.parquet", 2))
    _commit(log, 1, _add("f1.parquet", 2))
    _commit(log, 2, _add("f2.parquet", 2))
    io.listings.clear()
    snap = read_snapshot(where)
    assert snap is not None and (snap.version, snap.rows) == (5, 12)
    assert io.listings == [f"{3:020d}", None]
    (log / "_last_checkpoint").write_text("not json")
    io.listings.clear()
    assert count_rows(where) == 12 and io.listings == [None]


def test_a_snapshot_is_read_on_from_an_earlier_one(tmp_path: Path) -> None:
    """`since`: only the commits after it are read; the earlier answer is left as it was; commits
    gone from the log (its retention) read the log afresh from its checkpoint."""
    table = tmp_path / "t"
    log = table / "_delta_log"
    _commit(log, 0, _add("a.parquet", 3), _add("b.parquet", 4))
    io = _Listed()
    where = Location(io, str(table))
    first = read_snapshot(where)
    assert first is not None and (first.version, first.rows) == (0, 7)
    assert read_snapshot(where, since=first) is first  # nothing new
    _commit(log, 1, _remove("a.parquet"), _add("c.parquet", 5))
    _commit(log, 2, _add("d.parquet", 1))
    io.listings.clear()
    later = read_snapshot(where, since=first)
    assert later is not None and (later.version, later.rows) == (2, 4 + 5 + 1)
    assert io.listings == [f"{1:020d}"] and (first.version, first.rows) == (0, 7)
    assert read_snapshot(where).live == later.live  # type: ignore[union-attr]

    _checkpoint(log, 2, "b.parquet", "c.parquet", "d.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 2}))
    _commit(log, 3, _remove("d.parquet"))
    for v in range(2):
        (log / f"{v:020d}.json").unlink()
    fresh = read_snapshot(where, since=first)  # version 1 is gone: from the checkpoint
    assert fresh is not None and (fresh.version, sorted(p for p, _ in fresh.live)) == (3, ["b.parquet", "c.parquet"])


def test_a_follower_reads_a_tables_files_on_from_where_it_last_looked(tmp_path: Path) -> None:
    """maintenance.live_file_sizes with the snapshots it read before: the commits since, alone."""
    from replicator.maintenance import live_file_sizes

    table = tmp_path / "t"
    log = table / "_delta_log"
    _commit(log, 0, _add("a.parquet", 3))
    known: dict[str, Any] = {}
    assert live_file_sizes(cast(Any, None), str(table), known) == [1] and known[str(table)].version == 0
    _commit(log, 1, _add("b.parquet", 3))
    (log / f"{0:020d}.json").write_text("not a commit any more")  # read already: not read again
    assert live_file_sizes(cast(Any, None), str(table), known) == [1, 1] and known[str(table)].version == 1
    with pytest.raises(Inexact):
        read_snapshot(table, file_bytes)  # from the start: the damaged commit is read


def test_a_v2_checkpoint_named_by_the_hint_gives_the_version_not_the_rows(tmp_path: Path) -> None:
    """A v2 checkpoint (sidecars) cannot be replayed here: the rows are Inexact, as before, while
    the version (`status`'s fallback) still comes from the log's names, and reading the reader
    features does not fail (a v2 checkpoint's protocol is not read: features.py)."""
    from replicator.delta.features import reader_features

    table = tmp_path / "t"
    log = table / "_delta_log"
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"],
                             "writerFeatures": ["v2Checkpoint"]}}
    _commit(log, 0, protocol, _add("a.parquet", 3))
    _commit(log, 1, _add("b.parquet", 3))
    (log / f"{1:020d}.checkpoint.{'0' * 8}-0000-0000-0000-{'0' * 12}.json").write_text("{}\n")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 1}))
    _commit(log, 2, _add("c.parquet", 3))
    with pytest.raises(Inexact, match="v2 checkpoint"):
        count_rows(table)
    assert log_version(table) == 2
    assert isinstance(reader_features(table), list)
