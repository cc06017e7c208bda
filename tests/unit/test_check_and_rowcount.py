"""The pure parts of `replicator check` (the result and its report) and `replicator tables` (row
counts from a hand-written `_delta_log`, the tab-separated output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.cli.check import SHOWN_DIFFERENCES, count_by_table, evaluate, render
from replicator.cli.tables import TSV_COLUMNS, tsv_lines
from replicator.delta.rowcount import Inexact, count_rows
from replicator.sim.expected import ExpectedState
from replicator.sim.simcheck import ActualTable
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
