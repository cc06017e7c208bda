"""TiCDC's storage-sink files, pure: layout names, index / metadata / schema files in the shapes
tiflow writes them (docs/storage-sink.md), and the CSV codec: TiCDC's documented records, quoting,
NULL against the string "\\N", binary encodings, the refusal without a commit-ts column, and a
hypothesis round trip of encoder and decoder over every setting."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.codec.csv.common import CsvConfig, split_fields, split_records, split_texts
from replicator.codec.csv.decoder import MissingCommitTs, TableShape, decode_record, is_header
from replicator.codec.csv.encoder import encode_row
from replicator.codec.storage_sink.layout import (
    DATE_MASK,
    LINE_MASK,
    NUM_MASK,
    DataFile,
    date_key,
    fold_offset,
    index_writer,
    parse_data_file,
    parse_index,
    parse_metadata,
    unfold_offset,
)
from replicator.codec.storage_sink.schema import (
    TableColumn,
    parse_schema_file,
    parse_schema_name,
    render_schema_file,
    schema_file_name,
)
from replicator.errors import DecodeError
from replicator.events import Column, Flag, Op, RowChange, TypeCode, Value

TSO = 433305438660591626


def test_data_index_and_metadata_files() -> None:
    assert parse_data_file("CDC000005.csv") == DataFile(5, "", ".csv")
    assert parse_data_file("CDC00000000000000000001.json") == DataFile(1, "", ".json")
    split = parse_data_file("CDC_0a1b-2c_000012.csv")
    assert split is not None and (split.uuid, split.num) == ("0a1b-2c", 12) and split.name() == "CDC_0a1b-2c_000012.csv"
    assert parse_data_file("CDC.index") is None and parse_data_file("CDC000001.csv.123.tmp") is None
    assert parse_index(b"CDC00000000000000000007.csv\n", "x").num == 7
    assert parse_index(b"CDC00000000000000000007.csv\n", "x").name() == "CDC00000000000000000007.csv"
    assert index_writer("CDC.index") == "" and index_writer("CDC_ab12.index") == "ab12" and index_writer("x") is None
    with pytest.raises(DecodeError, match="not a data file name"):
        parse_index(b"garbage", "meta/CDC.index")
    assert parse_metadata(b'{"checkpoint-ts": 433305438660591626}', "metadata") == TSO
    with pytest.raises(DecodeError, match="checkpoint-ts"):
        parse_metadata(b'{"checkpoint": 1}', "metadata")


def test_dates_order_and_positions_fold_in_reading_order() -> None:
    assert date_key("2022-01-02", "day") == 18994 and date_key("2022-01", "month") == 18993
    assert date_key("2022", "year") == 18993 and date_key("2022-01", "day") is None
    assert date_key("2022", "none") is None and date_key("2022-13", "month") is None
    assert fold_offset(DATE_MASK, NUM_MASK, LINE_MASK) < 1 << 63  # the dead-letter table's BIGINT
    with pytest.raises(ValueError, match="out of range"):
        fold_offset(0, 1, LINE_MASK + 1)


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, DATE_MASK), st.integers(0, NUM_MASK), st.integers(0, LINE_MASK)),
                min_size=2, max_size=6))
def test_offsets_fold_and_unfold(positions: list[tuple[int, int, int]]) -> None:
    for p in positions:
        assert unfold_offset(fold_offset(*p)) == p
    assert sorted(positions) == sorted(positions, key=lambda p: fold_offset(*p))


TICDC_SCHEMA = b"""{
    "Table": "employee", "Schema": "hr", "Version": 1, "TableVersion": 437752935075545091,
    "Query": "ALTER TABLE hr.employee ADD COLUMN city VARCHAR(40)", "Type": 5,
    "TableColumns": [
        {"ColumnName": "Id", "ColumnType": "INT", "ColumnPrecision": "11", "ColumnNullable": "false",
         "ColumnIsPk": "true"},
        {"ColumnName": "Name", "ColumnType": "VARCHAR", "ColumnPrecision": "40"},
        {"ColumnName": "Salary", "ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "2"},
        {"ColumnName": "Photo", "ColumnType": "BLOB", "ColumnPrecision": "65535"},
        {"ColumnName": "Total", "ColumnType": "BIGINT UNSIGNED", "ColumnPrecision": "20"}
    ],
    "TableColumnsTotal": 5
}"""


def test_schema_file_as_ticdc_writes_it() -> None:
    sf = parse_schema_file(TICDC_SCHEMA, "hr/employee/meta/schema_437752935075545091_3512718420.json")
    assert (sf.schema, sf.table, sf.table_version, sf.ddl_type, sf.has_ddl) == ("hr", "employee", 437752935075545091,
                                                                                5, True)
    shapes = [c.shape() for c in sf.columns]
    assert shapes[0] == (TypeCode.LONG, Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY)
    assert shapes[1] == (TypeCode.VARCHAR, Flag.NULLABLE)
    assert shapes[3] == (TypeCode.BLOB, Flag.NULLABLE | Flag.BINARY)
    assert shapes[4][1] & Flag.UNSIGNED
    assert [c.sql_type() for c in sf.columns[1:3]] == ["VARCHAR(40)", "DECIMAL(10,2)"]
    again = parse_schema_file(render_schema_file(sf), "x")
    assert again == sf
    assert parse_schema_name(schema_file_name(sf)) == (sf.table_version, sf.checksum())
    assert parse_schema_name("schema_1_0000000002.json") == (1, 2) and parse_schema_name("CDC.index") is None
    db = parse_schema_file(b'{"Table": "", "Schema": "hr", "TableVersion": 5, "Query": "CREATE DATABASE `hr`", '
                           b'"Type": 1}', "hr/meta/schema_5_0000000000.json")
    assert db.is_database and db.ddl_type == 1
    with pytest.raises(DecodeError, match=r"unsupported ColumnType 'WIDGET'.*schema_9"):
        parse_schema_file(b'{"Schema": "a", "Table": "b", "TableColumns": [{"ColumnName": "c", "ColumnType": '
                          b'"WIDGET"}]}', "a/b/meta/schema_9_1.json")


EMPLOYEE = TableShape.of("hr", "employee", (
    TableColumn("Id", "INT", is_pk=True, nullable=False), TableColumn("LastName", "VARCHAR"),
    TableColumn("FirstName", "VARCHAR"), TableColumn("HireDate", "DATE"), TableColumn("OfficeLocation", "VARCHAR")))


def test_ticdc_documented_records() -> None:
    """The TiCDC CSV protocol page's example, with and without output-old-value."""
    cfg = CsvConfig()
    text = ('"I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"\r\n'
            '"U","employee","hr",433305438660591627,101,"Smith","Bob","2015-10-08","Los Angeles"\r\n'
            '"D","employee","hr",433305438660591629,101,"Smith","Bob","2017-03-13","Dallas"\r\n')
    rows = [decode_record(rec, EMPLOYEE, cfg) for _, rec in split_records(text, cfg)]
    assert [(r.op, r.commit_ts) for r in rows] == [(Op.INSERT, TSO), (Op.UPDATE, TSO + 1), (Op.DELETE, TSO + 3)]
    assert rows[0].columns[3].value == dt.date(2014, 6, 4) and rows[2].old_columns[4].value == "Dallas"
    old_value = ('"D","employee","hr",433305438660591630,true,101,"Smith","Bob","2015-10-08","Los Angeles"\r\n'
                 '"I","employee","hr",433305438660591630,true,101,"Smith","Bob","2015-10-08","Shanghai"\r\n')
    pair = [decode_record(rec, EMPLOYEE, cfg) for _, rec in split_records(old_value, cfg)]
    assert [r.op for r in pair] == [Op.DELETE, Op.INSERT] and pair[1].columns[4].value == "Shanghai"


def test_nulls_quotes_newlines_and_headers() -> None:
    cfg = CsvConfig()
    text = ('"I","employee","hr",1,7,\\N,"\\N","2014-06-04","a ""quoted""\r\nline"\r\n'
            '"I","employee","hr",2,8,"","",\\N,"x,y"\n')
    records = list(split_records(text, cfg))
    assert [line for line, _ in records] == [1, 3]
    first, second = (decode_record(rec, EMPLOYEE, cfg) for _, rec in records)
    assert [c.value for c in first.columns[1:]] == [None, "\\N", dt.date(2014, 6, 4), 'a "quoted"\r\nline']
    assert [c.value for c in second.columns[1:]] == ["", "", None, "x,y"]
    with pytest.raises(DecodeError, match="DATE value 'bad' at column 'HireDate'"):
        decode_record(records[0][1].replace('"2014-06-04"', '"bad"'), EMPLOYEE, cfg)
    header = '"ticdc-meta$operation","ticdc-meta$table","ticdc-meta$schema","ticdc-meta$commit-ts","Id"'
    assert is_header(header, cfg) and not is_header(records[0][1], cfg)
    with pytest.raises(DecodeError, match="not closed"):
        list(split_records('"I","a\r\n', cfg))
    assert [f.text for f in split_fields("a|~b|~|~", CsvConfig(delimiter="|~"))] == ["a", "b", "", ""]


def test_no_commit_ts_column_is_refused() -> None:
    cfg = CsvConfig()
    with pytest.raises(MissingCommitTs, match="include-commit-ts"):
        decode_record('"I","employee","hr",101,"Smith","Bob","2014-06-04","New York"', EMPLOYEE, cfg)
    with pytest.raises(DecodeError, match="fields"):
        decode_record('"I","employee","hr",1', EMPLOYEE, cfg)
    with pytest.raises(DecodeError, match="operation"):
        decode_record('"X","employee","hr",1,101,"Smith","Bob","2014-06-04","NY"', EMPLOYEE, cfg)


# -- the round trip -----------------------------------------------------------------------------
KINDS = (
    (TableColumn("id", "BIGINT", is_pk=True, nullable=False), st.integers(-(1 << 63), (1 << 63) - 1)),
    (TableColumn("u", "BIGINT UNSIGNED"), st.integers(0, (1 << 64) - 1)),
    (TableColumn("s", "VARCHAR", "64"), st.text(alphabet=st.characters(codec="utf-8"), max_size=12)),
    (TableColumn("b", "VARBINARY", "16"), st.binary(max_size=12)),
    (TableColumn("blob", "BLOB"), st.binary(max_size=12)),
    (TableColumn("d", "DECIMAL", "20", "6"), st.decimals(min_value=-10**13, max_value=10**13, places=6,
                                                         allow_nan=False, allow_infinity=False)),
    (TableColumn("f", "DOUBLE"), st.floats(allow_nan=False, allow_infinity=False)),
    (TableColumn("day", "DATE"), st.dates(min_value=dt.date(1000, 1, 1))),
    (TableColumn("at", "DATETIME", "", "6"), st.datetimes(min_value=dt.datetime(1000, 1, 1))),
    (TableColumn("ts", "TIMESTAMP", "", "3"),
     st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2037, 1, 1), timezones=st.just(dt.UTC))
     .map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000))),
    (TableColumn("t", "TIME"), st.sampled_from(["00:00:00", "-838:59:59", "12:34:56.5"])),
    (TableColumn("j", "JSON"), st.sampled_from(['{"a": [1, "x,\\"y\\""]}', "null", "[]"])),
    (TableColumn("e", "ENUM"), st.sampled_from(["a", "b c", "d,e"])),
    (TableColumn("bit", "BIT", "8"), st.integers(0, 255)),
)
COLUMNS = tuple(c for c, _ in KINDS)
SHAPE = TableShape.of("db", "t", COLUMNS)

configs = st.builds(CsvConfig, delimiter=st.sampled_from([",", "|", "|~|", "\t"]), quote=st.sampled_from(['"', "'"]),
                    terminator=st.sampled_from(["\r\n", "\n"]), null=st.sampled_from(["\\N", "NULL"]),
                    output_old_value=st.booleans(), binary_encoding=st.sampled_from(["base64", "hex"]))


@st.composite
def images(draw: st.DrawFn) -> tuple[Column, ...]:
    cols = []
    for (col, values), (name, code, flags) in zip(KINDS, SHAPE.columns, strict=True):
        nullable = col.nullable and not col.is_pk
        value = cast(Value, draw(st.none() | values) if nullable else draw(values))
        cols.append(Column(name, code, flags, value))
    return tuple(cols)


def _normal(cols: tuple[Column, ...]) -> list[object]:
    return [Decimal(v).normalize() if isinstance(v, Decimal) else v for v in (c.value for c in cols)]


@settings(max_examples=60, deadline=None)
@given(configs, st.lists(st.tuples(st.sampled_from(list(Op)), images(), images()), min_size=1, max_size=4))
def test_csv_round_trip(cfg: CsvConfig, changes: list[tuple[Op, tuple[Column, ...], tuple[Column, ...]]]) -> None:
    """Encoder and decoder agree on every setting: the records decode to the written values, NULL
    and the string of the null text stay apart, binary bytes survive both encodings."""
    rows = []
    for i, (op, new, old) in enumerate(changes):
        rows.append(RowChange(TSO + i, "db", "t", op, columns=() if op is Op.DELETE else new,
                              old_columns=old if op is not Op.INSERT else ()))
    text = "".join(rec + cfg.terminator for r in rows for rec in encode_row(r, cfg))
    got = [decode_record(rec, SHAPE, cfg) for _, rec in split_records(text, cfg)]
    want: list[tuple[Op, int, list[object]]] = []
    for r in rows:
        if r.op is Op.UPDATE and cfg.output_old_value:
            want += [(Op.DELETE, r.commit_ts, _normal(r.old_columns)), (Op.INSERT, r.commit_ts, _normal(r.columns))]
        else:
            want.append((r.op, r.commit_ts, _normal(r.image if r.op is Op.DELETE else r.columns)))
    assert [(g.op, g.commit_ts, _normal(g.image if g.op is Op.DELETE else g.columns)) for g in got] == want


@given(st.lists(st.tuples(st.text(alphabet='ab,"\n\\N |~', max_size=8), st.booleans()), min_size=1, max_size=8),
       st.sampled_from([",", "|"]))
def test_the_fast_field_splitter_agrees_with_the_plain_one(fields: list[tuple[str, bool]], delimiter: str) -> None:
    """`split_texts` (the C csv reader when no null text is in the record) and `split_fields` give
    the same texts, and the same quoted flags where those are kept."""
    config = CsvConfig(delimiter=delimiter)
    parts = []
    for text, quote in fields:
        must = any(c in text for c in (delimiter, '"', "\n")) or text.startswith('"')
        parts.append('"' + text.replace('"', '""') + '"' if quote or must else text)
    record = delimiter.join(parts)
    plain = split_fields(record, config)
    texts, quoted = split_texts(record, config)
    assert texts == [f.text for f in plain]
    assert quoted is None or quoted == [f.quoted for f in plain]
