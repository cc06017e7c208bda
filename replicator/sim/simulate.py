"""A TiCDC workload simulator: a model upstream database and the Kafka stream TiCDC emits for it.

Why: users must be able to try the replicator without a TiDB of their own, and tests and
benchmarks need streams whose true final state is known. The model upstream holds several
tables of varied column types (signed/unsigned integers with their extremes, DECIMAL up to
(65,30), FLOAT/DOUBLE, DATE/DATETIME(6)/TIMESTAMP(3)/TIME/YEAR, JSON, unicode text and empty
strings, arbitrary bytes, ENUM/SET, BIT, NULLs) in two databases. It runs transactions of one to
dozens of rows across tables (inserts; updates with old values; deletes; primary-key changes
sent as delete + insert, as TiCDC splits them), DDL mid-stream (broadcast), resolved events per
partition at independent moments, and at-least-once replays (producer retries re-sending a few
recent events, and changefeed restarts re-sending everything after the last checkpoint). Rows
are routed to partitions by a hash of their table and key, so every change of a row stays on one
partition. The stream is encoded with the project's own encoders (Open Protocol or Craft,
batched as TiCDC batches rows) and the final state of every table is known exactly.

Deterministic per seed: the same configuration gives the same messages and the same expected
state (with ``ddl="auto"`` the DDL mix depends on what this build's ``replicator.delta.ddl``
supports; the resolved mix is recorded in the expected file). Streaming: events are generated
one transaction at a time; memory holds the live rows and a bounded replay history, so a
million events fit comfortably.

Pure logic: no Spark and no Kafka import here (``produce`` imports kafka-python lazily).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import random
import re
import struct
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from replicator.codec.render import value_to_json
from replicator.errors import ConfigError, ReplicatorError
from replicator.events import Column, DdlEvent, Event, Flag, Op, Resolved, RowChange, TypeCode, Value

log = logging.getLogger("replicator.sim.simulate")

EXPECTED_FORMAT: Final = 1
DEFAULT_START: Final = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
"""Wall-clock time of the first commit ts when none is given (keeps streams reproducible)."""

# ---------------------------------------------------------------------------------------------
# Column types: parsed from the MySQL type text a template declares, so templates read like DDL.

_INT_TYPES: Final = {
    "TINYINT": (TypeCode.TINY, 8),
    "SMALLINT": (TypeCode.SHORT, 16),
    "MEDIUMINT": (TypeCode.INT24, 24),
    "INT": (TypeCode.LONG, 32),
    "BIGINT": (TypeCode.LONGLONG, 64),
}
_TEXT_TYPES: Final = {  # name -> (type code, default max characters)
    "CHAR": (TypeCode.STRING, 1),
    "VARCHAR": (TypeCode.VARCHAR, 255),
    "TINYTEXT": (TypeCode.TINY_BLOB, 255),
    "TEXT": (TypeCode.BLOB, 400),
    "MEDIUMTEXT": (TypeCode.MEDIUM_BLOB, 600),
    "LONGTEXT": (TypeCode.LONG_BLOB, 800),
}
_BINARY_TYPES: Final = {  # name -> (type code, default max bytes)
    "BINARY": (TypeCode.STRING, 1),
    "VARBINARY": (TypeCode.VARCHAR, 255),
    "TINYBLOB": (TypeCode.TINY_BLOB, 255),
    "BLOB": (TypeCode.BLOB, 1024),
    "MEDIUMBLOB": (TypeCode.MEDIUM_BLOB, 2048),
    "LONGBLOB": (TypeCode.LONG_BLOB, 2048),
}
_SIMPLE_TYPES: Final = {
    "FLOAT": (TypeCode.FLOAT, "float"),
    "DOUBLE": (TypeCode.DOUBLE, "double"),
    "DATE": (TypeCode.DATE, "date"),
    "YEAR": (TypeCode.YEAR, "year"),
    "JSON": (TypeCode.JSON, "json"),
}
_TEMPORAL_TYPES: Final = {
    "DATETIME": (TypeCode.DATETIME, "datetime"),
    "TIMESTAMP": (TypeCode.TIMESTAMP, "timestamp"),
    "TIME": (TypeCode.TIME, "time"),
}
_TYPE_RE: Final = re.compile(r"^([A-Z]+)(?:\((.*)\))?( UNSIGNED)?$")
_LABEL_RE: Final = re.compile(r"'((?:[^']|'')*)'")


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """One column of a model table: its MySQL type text plus what TiCDC puts on the wire for it.

    ``kind`` selects the value generator; ``args`` are its parameters (integer range, precision
    and scale, max length, fractional digits, labels, bits).
    """

    name: str
    sql: str
    type_code: int
    kind: str
    args: tuple[Any, ...] = ()
    nullable: bool = True
    unsigned: bool = False
    binary: bool = False

    def flags(self, key: bool) -> int:
        """TiCDC column flags: handle/primary key, nullable, unsigned, binary charset."""
        f = 0
        if key:
            f |= Flag.HANDLE_KEY | Flag.PRIMARY_KEY
        if self.nullable and not key:
            f |= Flag.NULLABLE
        if self.unsigned:
            f |= Flag.UNSIGNED
        if self.binary:
            f |= Flag.BINARY
        return int(f)

    def definition(self, key: bool = False) -> str:
        """The column as it appears in CREATE TABLE / ALTER TABLE."""
        null = " NOT NULL" if key or not self.nullable else " NULL"
        return f"{quote(self.name)} {self.sql}{null}"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.args) if self.kind in ("enum", "set") else ()


def quote(name: str) -> str:
    """MySQL backtick quoting."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str, sql: str, nullable: bool = True) -> ColumnDef:
    """A ColumnDef from MySQL type text such as ``BIGINT UNSIGNED``, ``DECIMAL(12,2)``, ``ENUM('a','b')``."""
    m = _TYPE_RE.match(sql)
    if m is None:
        raise ValueError(f"cannot parse column type {sql!r}")
    base, params, unsigned_text = m.group(1), m.group(2), m.group(3)
    unsigned = bool(unsigned_text)
    nums = [int(p) for p in params.split(",")] if params and base not in ("ENUM", "SET") else []
    if base in _INT_TYPES:
        code, bits = _INT_TYPES[base]
        lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return ColumnDef(name, sql, int(code), "int", (lo, hi), nullable, unsigned, True)
    if base == "DECIMAL":
        precision, scale = ([*nums, 10, 0])[:2] if nums else (10, 0)
        if len(nums) == 1:
            scale = 0
        return ColumnDef(name, sql, int(TypeCode.NEWDECIMAL), "decimal", (precision, scale), nullable, False, True)
    if base in _SIMPLE_TYPES:
        code, kind = _SIMPLE_TYPES[base]
        return ColumnDef(name, sql, int(code), kind, (), nullable, base == "YEAR", True)
    if base in _TEMPORAL_TYPES:
        code, kind = _TEMPORAL_TYPES[base]
        return ColumnDef(name, sql, int(code), kind, (nums[0] if nums else 0,), nullable, False, True)
    if base in _TEXT_TYPES:
        code, default_len = _TEXT_TYPES[base]
        return ColumnDef(name, sql, int(code), "text", (nums[0] if nums else default_len, base == "CHAR"), nullable)
    if base in _BINARY_TYPES:
        code, default_len = _BINARY_TYPES[base]
        n = nums[0] if nums else default_len
        return ColumnDef(name, sql, int(code), "bytes", (n, base == "BINARY"), nullable, False, True)
    if base in ("ENUM", "SET"):
        labels = tuple(lbl.replace("''", "'") for lbl in _LABEL_RE.findall(params or ""))
        code = TypeCode.ENUM if base == "ENUM" else TypeCode.SET
        return ColumnDef(name, sql, int(code), base.lower(), labels, nullable)
    if base == "BIT":
        return ColumnDef(name, sql, int(TypeCode.BIT), "bit", (nums[0] if nums else 1,), nullable, False, True)
    raise ValueError(f"unsupported column type {sql!r}")


# ---------------------------------------------------------------------------------------------
# Value generators: mostly ordinary values, a steady trickle of edge cases.

_F32: Final = struct.Struct("<f")
_F32_EDGES: Final = (0.0, 1.0, -1.0, 3.4028234663852886e38, -3.4028234663852886e38,
                     1.1754943508222875e-38, 1.401298464324817e-45, 16777216.0, 0.5)
_F64_EDGES: Final = (0.0, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
                     0.1, 1 / 3, -123456789.125, 9007199254740993.0)
_WORDS: Final = (
    "alpha", "beta", "gamma", "order", "shipped", "naïve", "café", "Ωmega", "日本語", "北京市", "😀", "🎉🚀",
    "Ünïcödé", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "नमस्ते", "שָׁלוֹם", "مرحبا", "Ελληνικά", "e\u0301", "zero\u200bwidth", "tab\tsep",
    "line\nbreak", "it's", 'say "hi"', "back\\slash", "<b>&amp;</b>", "%s%%", "NULL", "null", "-- ;DROP",
)
_SPECIAL_TEXT: Final = ("", " ", "NULL", "\x00", "a\x00b", "😀😀😀", "\u2028\u2029", "\r\n", "'", "\\")
_SPECIAL_BYTES: Final = (b"", b"\x00", b"\xff", b"\x00\xff\x00", bytes(range(256)), "héllo".encode(),
                         b"\xc3\x28", b"\xed\xa0\x80", b"\\x00", b'"quoted"')
_JSON_SCALARS: Final = ("null", "true", "false", "0", "-1.5", '""', '"😀"', "[]", "{}")
_EPOCH_DAY: Final = dt.date(1970, 1, 1)


def f32(x: float) -> float:
    """The float32 nearest to ``x``, as a Python float (what a FLOAT column holds)."""
    return float(_F32.unpack(_F32.pack(x))[0])


def _gen_int(rnd: random.Random, lo: int, hi: int) -> int:
    r = rnd.random()
    if r < 0.06:
        return rnd.choice((lo, hi, 0, lo + 1, hi - 1, 1))
    if r < 0.7:
        return rnd.randint(max(lo, -1000), min(hi, 100_000))
    return rnd.randint(lo, hi)


def _gen_decimal(rnd: random.Random, precision: int, scale: int) -> Decimal:
    int_digits = precision - scale
    r = rnd.random()
    if r < 0.05:
        whole = "9" * int_digits or "0"
        frac = "9" * scale
        sign = rnd.choice(("", "-"))
    elif r < 0.08:
        whole, frac, sign = "0", "0" * scale, ""
    else:
        n = rnd.randint(0, min(int_digits, rnd.choice((3, 6, int_digits))))
        whole = str(rnd.randrange(10**n)) if n else "0"
        frac = f"{rnd.randrange(10**scale):0{scale}d}" if scale else ""
        sign = "-" if rnd.random() < 0.25 else ""
    if sign and not whole.strip("0") and not frac.strip("0"):
        sign = ""
    return Decimal(f"{sign}{whole}.{frac}" if scale else f"{sign}{whole}")


def _gen_text(rnd: random.Random, max_chars: int, fixed: bool) -> str:
    if rnd.random() < 0.07:
        text = rnd.choice(_SPECIAL_TEXT)
    else:
        text = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(1, 6)))
    text = text[:max_chars]
    return text.rstrip(" ") if fixed else text  # CHAR drops trailing spaces on read (PAD semantics)


def _gen_bytes(rnd: random.Random, max_len: int, fixed: bool) -> bytes:
    if rnd.random() < 0.1:
        data = rnd.choice(_SPECIAL_BYTES)
    else:
        n = rnd.randint(0, 24) if rnd.random() < 0.9 else rnd.randint(0, max_len)
        data = rnd.randbytes(n)
    data = data[:max_len]
    return data.ljust(max_len, b"\x00") if fixed else data  # BINARY(n) is zero-padded to n bytes


def _json_value(rnd: random.Random, depth: int) -> Any:
    r = rnd.random()
    if depth > 2 or r < 0.4:
        return rnd.choice((None, True, False, rnd.randint(-10**12, 10**12), rnd.randint(0, 99) / 4,
                           rnd.choice(_WORDS), ""))
    if r < 0.7:
        return [_json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {rnd.choice(_WORDS): _json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}


def _gen_json(rnd: random.Random) -> str:
    if rnd.random() < 0.08:
        return rnd.choice(_JSON_SCALARS)
    doc = {"id": rnd.randint(1, 10**6), "name": rnd.choice(_WORDS), "tags": [rnd.choice(_WORDS) for _ in range(2)],
           "extra": _json_value(rnd, 0)}
    return json.dumps(doc, ensure_ascii=False, sort_keys=True)  # TiDB's JSON text: ", " and ": " separators


def _gen_date(rnd: random.Random) -> dt.date:
    r = rnd.random()
    if r < 0.04:
        return rnd.choice((dt.date(1000, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), dt.date(2000, 2, 29)))
    return _EPOCH_DAY + dt.timedelta(days=rnd.randint(0, 25_000) if r < 0.9 else rnd.randint(-700_000, 2_900_000))


def _gen_datetime(rnd: random.Random, fsp: int) -> dt.datetime:
    r = rnd.random()
    if r < 0.04:
        value = rnd.choice((dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                            dt.datetime(1970, 1, 1), dt.datetime(2038, 1, 19, 3, 14, 8)))
    else:
        value = dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rnd.randint(0, 1_000_000_000),
                                                       microseconds=rnd.randrange(1_000_000))
    return _truncate_fsp(value, fsp)


def _gen_timestamp(rnd: random.Random, fsp: int) -> dt.datetime:
    if rnd.random() < 0.04:
        seconds, micros = rnd.choice(((1, 0), (2_147_483_647, 999_999), (946_684_800, 0)))
    else:
        seconds, micros = rnd.randint(1, 2_147_483_646), rnd.randrange(1_000_000)
    value = dt.datetime.fromtimestamp(seconds, tz=dt.UTC) + dt.timedelta(microseconds=micros)
    return _truncate_fsp(value, fsp)


def _truncate_fsp(value: dt.datetime, fsp: int) -> dt.datetime:
    unit = 10 ** (6 - fsp)
    return value.replace(microsecond=value.microsecond // unit * unit)


def _gen_time(rnd: random.Random, fsp: int) -> str:
    frac_text = ""
    if rnd.random() < 0.05:
        text = rnd.choice(("838:59:59", "-838:59:59", "00:00:00", "-00:00:01", "23:59:59", "100:00:00"))
        return text + ("." + "0" * fsp if fsp else "")
    hours = rnd.randint(0, 23) if rnd.random() < 0.8 else rnd.randint(0, 837)
    minutes, seconds = rnd.randint(0, 59), rnd.randint(0, 59)
    frac = rnd.randrange(10**fsp) if fsp else 0
    if fsp:
        frac_text = f".{frac:0{fsp}d}"
    sign = "-" if rnd.random() < 0.15 and (hours or minutes or seconds or frac) else ""
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{frac_text}"


_Gen = Callable[[random.Random, tuple[Any, ...]], Value]
_GENERATORS: Final[dict[str, _Gen]] = {
    "int": lambda rnd, a: _gen_int(rnd, a[0], a[1]),
    "text": lambda rnd, a: _gen_text(rnd, a[0], a[1]),
    "decimal": lambda rnd, a: _gen_decimal(rnd, a[0], a[1]),
    "double": lambda rnd, a: rnd.choice(_F64_EDGES) if rnd.random() < 0.05 else rnd.uniform(-1e6, 1e6),
    "float": lambda rnd, a: rnd.choice(_F32_EDGES) if rnd.random() < 0.05 else f32(round(rnd.uniform(-1e4, 1e4), 2)),
    "bytes": lambda rnd, a: _gen_bytes(rnd, a[0], a[1]),
    "datetime": lambda rnd, a: _gen_datetime(rnd, a[0]),
    "timestamp": lambda rnd, a: _gen_timestamp(rnd, a[0]),
    "date": lambda rnd, a: _gen_date(rnd),
    "time": lambda rnd, a: _gen_time(rnd, a[0]),
    "year": lambda rnd, a: rnd.choice((1901, 2155)) if rnd.random() < 0.05 else rnd.randint(1970, 2100),
    "json": lambda rnd, a: _gen_json(rnd),
    "enum": lambda rnd, a: rnd.randint(1, len(a)),
    "set": lambda rnd, a: rnd.randrange(1 << len(a)),
    "bit": lambda rnd, a: rnd.choice((0, (1 << a[0]) - 1)) if rnd.random() < 0.1 else rnd.randrange(1 << a[0]),
}


def gen_value(col: ColumnDef, rnd: random.Random) -> Value:
    """A random upstream value for ``col`` (None for a nullable column now and then)."""
    if col.nullable and rnd.random() < 0.08:
        return None
    return _GENERATORS[col.kind](rnd, col.args)


def table_value(col: ColumnDef, value: Value) -> Any:
    """What the replicated table holds for an upstream value, in the JSON conventions of
    ``replicator.codec.render`` (ENUM/SET as their labels, as the Delta table stores them)."""
    if value is None:
        return None
    if col.kind == "enum" and isinstance(value, int):
        return col.args[value - 1] if value else ""
    if col.kind == "set" and isinstance(value, int):
        return ",".join(label for i, label in enumerate(col.args) if value >> i & 1)
    return value_to_json(value)


# ---------------------------------------------------------------------------------------------
# Table templates: the model upstream's schema, and what each DDL kind does to each table.

KeyFn = Callable[[random.Random, int], tuple[Value, ...]]
_I64 = 1 << 63
_U64 = 1 << 64


def _key_signed(rnd: random.Random, n: int) -> tuple[Value, ...]:
    r = rnd.random()
    if r < 0.01:
        return (rnd.choice((-_I64, _I64 - 1, 0, -1)),)
    return (-n if r < 0.15 else n,)


def _key_unsigned(rnd: random.Random, n: int) -> tuple[Value, ...]:
    if rnd.random() < 0.01:
        return (rnd.choice((0, _U64 - 1, _I64, _I64 - 1)),)
    return (n * 7919 + 1_000_000_000_000,)


def _key_composite(rnd: random.Random, n: int) -> tuple[Value, ...]:
    return (n // 30_000 + rnd.choice((1, 2, 3)) * 1000, n % 30_000 - 15_000)


def _key_text_date(rnd: random.Random, n: int) -> tuple[Value, ...]:
    word = rnd.choice(("cpu", "mem", "disk.io", "net/rx", "latency_p99", "温度", "Ωhm", "😀", "", "a b"))
    return (f"{word}#{n}", _EPOCH_DAY + dt.timedelta(days=18_000 + rnd.randint(0, 3000)))


def _key_small(rnd: random.Random, n: int) -> tuple[Value, ...]:
    return (n,)


@dataclass(frozen=True)
class Template:
    """A model table: columns, key, how new keys are drawn, and its DDL evolution."""

    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    key: tuple[str, ...]
    key_fn: KeyFn
    add_column: ColumnDef
    modify: tuple[str, str]  # column, wider MySQL type
    drop_column: str
    weight: float = 1.0


def _cols(*specs: tuple[str, str] | tuple[str, str, bool]) -> tuple[ColumnDef, ...]:
    return tuple(column(*s) for s in specs)


TEMPLATES: Final[tuple[Template, ...]] = (
    Template(
        "shop", "customers",
        _cols(("id", "BIGINT", False), ("name", "VARCHAR(64)", False), ("email", "VARCHAR(128)"),
              ("tier", "ENUM('bronze','silver','gold','platinum','ünïcode ''q''')"),
              ("tags", "SET('vip','newsletter','b2b','churn-risk')"), ("balance", "DECIMAL(12,2)"),
              ("birthday", "DATE"), ("created_at", "DATETIME(6)", False), ("note", "TEXT"),
              ("active", "TINYINT", False), ("score", "DOUBLE")),
        ("id",), _key_signed,
        add_column=column("loyalty_points", "INT"), modify=("active", "SMALLINT"), drop_column="note", weight=1.0,
    ),
    Template(
        "shop", "orders",
        _cols(("order_id", "BIGINT UNSIGNED", False), ("customer_id", "BIGINT"), ("amount", "DECIMAL(20,6)"),
              ("exact_total", "DECIMAL(65,30)"), ("qty", "INT UNSIGNED"), ("discount", "FLOAT"),
              ("weight_kg", "DOUBLE"), ("status", "TINYINT UNSIGNED", False), ("placed_at", "TIMESTAMP(3)"),
              ("ship_window", "TIME"), ("fiscal_year", "YEAR"), ("flags", "BIT(8)"), ("attrs", "JSON"),
              ("currency", "CHAR(3)")),
        ("order_id",), _key_unsigned,
        add_column=column("coupon", "VARCHAR(16)"), modify=("status", "SMALLINT UNSIGNED"), drop_column="attrs",
        weight=1.5,
    ),
    Template(
        "shop", "attachments",
        _cols(("owner_id", "INT", False), ("seq", "SMALLINT", False), ("mime", "VARCHAR(32)"), ("data", "BLOB"),
              ("digest", "VARBINARY(32)"), ("magic", "BINARY(4)"), ("size_kb", "MEDIUMINT UNSIGNED"),
              ("delta", "MEDIUMINT"), ("title", "TINYTEXT"), ("body", "LONGTEXT"), ("checksum", "BIT(64)"),
              ("small", "TINYINT UNSIGNED"), ("uploaded", "DATETIME")),
        ("owner_id", "seq"), _key_composite,
        add_column=column("caption", "VARCHAR(64)"), modify=("size_kb", "INT UNSIGNED"), drop_column="title",
        weight=0.8,
    ),
    Template(
        "metrics", "samples",
        _cols(("metric", "VARCHAR(48)", False), ("day", "DATE", False), ("value", "DOUBLE"), ("ratio", "FLOAT"),
              ("hits", "INT"), ("total", "BIGINT UNSIGNED"), ("window", "TIME(6)"), ("observed_at", "TIMESTAMP(6)"),
              ("labels", "JSON"), ("healthy", "BIT(1)"), ("samples", "SMALLINT UNSIGNED"), ("yr", "YEAR"),
              ("avg", "DECIMAL(28,10)")),
        ("metric", "day"), _key_text_date,
        add_column=column("unit", "ENUM('ms','s','bytes','%')"), modify=("hits", "BIGINT"), drop_column="labels",
        weight=1.0,
    ),
    Template(
        "shop", "inventory",
        _cols(("sku_id", "INT UNSIGNED", False), ("sku", "CHAR(12)", False), ("qty", "SMALLINT"),
              ("price", "DECIMAL(10,2)", False), ("updated_at", "TIMESTAMP"), ("warehouse", "VARCHAR(24)"),
              ("photo", "MEDIUMBLOB"), ("notes", "MEDIUMTEXT")),
        ("sku_id",), _key_small,
        add_column=column("reorder_at", "DATETIME(3)"), modify=("qty", "INT"), drop_column="notes", weight=0.7,
    ),
)

# DDL kinds: the TiDB DDL type codes each one emits (an "auto" mix keeps the kinds whose codes
# replicator.delta.ddl can apply).
DDL_KINDS: Final[dict[str, tuple[int, ...]]] = {
    "create_schema": (1,),
    "create_table": (3,),
    "add_column": (5,),
    "modify_column": (12,),
    "truncate": (11,),
    "drop_column": (6,),
    "drop_table": (4, 3),  # DROP TABLE, then the table is created again later
    "rename_table": (14,),
}
# Where in the stream (fraction of row changes) each mid-stream DDL happens, and on which table
# (index into the simulated tables, modulo their number; -1 = the last table).
_DDL_PLAN: Final = (
    (0.10, "create_table", -1),
    (0.30, "add_column", 0),
    (0.40, "modify_column", 1),
    (0.55, "truncate", 2),
    (0.65, "drop_column", 3),
    (0.75, "drop_table", -1),
    (0.90, "rename_table", 1),
)


def supported_ddl_kinds() -> tuple[str, ...]:
    """The DDL kinds whose every type code this build's ``replicator.delta.ddl`` applies."""
    try:
        from replicator.delta.ddl import HANDLERS
    except ImportError:  # pragma: no cover - the engine's DDL layer is part of every build
        return ("create_table",)
    codes = set(HANDLERS)
    return tuple(k for k, need in DDL_KINDS.items() if set(need) <= codes)


def resolve_ddl_kinds(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """``auto`` (default), ``all``, ``none`` (CREATE TABLE only) or a comma list of kinds."""
    if spec is None or spec == "auto":
        kinds: Sequence[str] = supported_ddl_kinds()
    elif spec == "all":
        kinds = tuple(DDL_KINDS)
    elif spec == "none":
        kinds = ()
    else:
        kinds = [k.strip() for k in spec.split(",") if k.strip()] if isinstance(spec, str) else list(spec)
    unknown = sorted(set(kinds) - set(DDL_KINDS))
    if unknown:
        raise ConfigError(f"unknown DDL kind(s) {unknown}; known: {', '.join(DDL_KINDS)}, or auto/all/none")
    return tuple(k for k in DDL_KINDS if k in kinds or k == "create_table")


# ---------------------------------------------------------------------------------------------
# Configuration, the model upstream, the event stream.


@dataclass(frozen=True)
class SimConfig:
    """What to simulate. ``events`` counts original row changes (replays come on top)."""

    protocol: Literal["open", "craft"] = "open"
    seed: int = 1
    events: int = 5000
    partitions: int = 3
    tables: int = 4
    ddl: str | Sequence[str] | None = "auto"
    start_time: dt.datetime = DEFAULT_START
    max_batch_size: int = 16  # rows per Kafka message (TiCDC's max-batch-size)
    resolved_every: int = 40  # mean transactions between resolved events, per partition
    retry_rate: float = 0.01  # per transaction: re-send a few recent events of one partition
    restart_rate: float = 0.0005  # per transaction: a changefeed restart re-sends from the checkpoint
    max_txn_rows: int = 40

    def __post_init__(self) -> None:
        if self.protocol not in ("open", "craft"):
            raise ConfigError(f"protocol must be open or craft, not {self.protocol!r}")
        if self.events < 0:
            raise ConfigError("--events must be >= 0")
        if not 1 <= self.partitions <= 1024:
            raise ConfigError("--partitions must be 1..1024")
        if self.tables < 1:
            raise ConfigError("--tables must be >= 1")
        if self.max_batch_size < 1 or self.resolved_every < 1 or self.max_txn_rows < 1:
            raise ConfigError("max_batch_size, resolved_every and max_txn_rows must be >= 1")


class _KeyPool:
    """Live keys with O(1) insert, delete and uniform random choice."""

    def __init__(self) -> None:
        self.items: list[tuple[Value, ...]] = []
        self.index: dict[tuple[Value, ...], int] = {}

    def add(self, key: tuple[Value, ...]) -> None:
        self.index[key] = len(self.items)
        self.items.append(key)

    def remove(self, key: tuple[Value, ...]) -> None:
        i = self.index.pop(key)
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.index[last] = i

    def clear(self) -> None:
        self.items.clear()
        self.index.clear()

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class _Table:
    template: Template
    name: str
    columns: list[ColumnDef]
    live: bool = False
    rows: dict[tuple[Value, ...], dict[str, Value]] = field(default_factory=dict)
    keys: _KeyPool = field(default_factory=_KeyPool)
    counter: int = 0
    freed: deque[tuple[Value, ...]] = field(default_factory=lambda: deque(maxlen=64))
    # (name, type code, flags) per column, and each live row's last image: building Column objects
    # dominates generation time, and an update's old image is the previous new image.
    shape: list[tuple[str, int, int]] = field(default_factory=list)
    images: dict[tuple[Value, ...], tuple[Column, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.set_columns(self.columns)

    def set_columns(self, columns: list[ColumnDef]) -> None:
        self.columns = columns
        self.shape = [(c.name, c.type_code, c.flags(c.name in self.template.key)) for c in columns]
        self.images.clear()

    def image(self, key: tuple[Value, ...], row: Mapping[str, Value]) -> tuple[Column, ...]:
        img = self.images.get(key)
        if img is None:
            img = tuple(Column(n, code, flags, row[n]) for n, code, flags in self.shape)
            self.images[key] = img
        return img

    def clear(self) -> None:
        self.rows.clear()
        self.keys.clear()
        self.images.clear()

    @property
    def schema(self) -> str:
        return self.template.schema

    @property
    def key(self) -> tuple[str, ...]:
        return self.template.key

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"

    def create_sql(self) -> str:
        cols = ", ".join(c.definition(c.name in self.key) for c in self.columns)
        pk = ", ".join(quote(k) for k in self.key)
        return (f"CREATE TABLE {self.qualified} ({cols}, PRIMARY KEY ({pk})) "
                "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")

    def column_def(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass
class SimStats:
    """Counts of what the stream holds (reported in the expected file)."""

    transactions: int = 0
    row_changes: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    key_changes: int = 0
    ddl: int = 0
    resolved: int = 0
    retries: int = 0
    restarts: int = 0
    replayed_events: int = 0
    messages: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["messages"] = {str(k): v for k, v in sorted(self.messages.items())}
        return d


@dataclass
class ExpectedState:
    """The true final tables: ``tables["schema.table"]`` = rows (dicts in render.py JSON
    conventions, sorted by key), ``schemas`` = key and column types, ``watermark`` = final ts."""

    tables: dict[str, list[dict[str, Any]]]
    schemas: dict[str, dict[str, Any]]
    watermark: int
    generator: dict[str, Any]
    stats: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"format": EXPECTED_FORMAT, "generator": self.generator, "watermark": self.watermark,
                "stats": self.stats, "schemas": self.schemas, "tables": self.tables}

    def write(self, path: str | Path) -> Path:
        """Write as JSON (UTF-8), one row per line so that two files diff readably."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        doc = self.to_json()
        tables = doc.pop("tables")
        lines = ["{"]
        lines += [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in doc.items()]
        lines.append(' "tables": {')
        names = sorted(tables)
        for i, name in enumerate(names):
            rows = [json.dumps(r, ensure_ascii=False, allow_nan=False) for r in tables[name]]
            end = "," if i < len(names) - 1 else ""
            if rows:
                lines.append(f"  {json.dumps(name, ensure_ascii=False)}: [")
                lines += [f"   {r}," for r in rows[:-1]] + [f"   {rows[-1]}", f"  ]{end}"]
            else:
                lines.append(f"  {json.dumps(name, ensure_ascii=False)}: []{end}")
        lines += [" }", "}"]
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return p

    @staticmethod
    def load(path: str | Path) -> ExpectedState:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read expected state {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != EXPECTED_FORMAT:
            raise ConfigError(f"{path} is not an expected-state file of format {EXPECTED_FORMAT}")
        return ExpectedState(doc["tables"], doc["schemas"], int(doc["watermark"]), doc.get("generator", {}),
                             doc.get("stats", {}))


class SimMessage(NamedTuple):
    """One Kafka record of the simulated topic."""

    partition: int
    key: bytes | None
    value: bytes
    timestamp_ms: int


def _route(schema: str, table: str, key: tuple[Value, ...], partitions: int) -> int:
    """Partition of a row: a stable hash of table and handle key (TiCDC's index-value dispatcher)."""
    return zlib.crc32(f"{schema}.{table}\x00{key!r}".encode("utf-8", "surrogatepass")) % partitions


class Simulation:
    """One simulated stream. Iterate ``events()``, ``messages()`` or ``records()`` once; afterwards
    ``expected`` holds the true final state and ``stats`` the counts."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.ddl_kinds = resolve_ddl_kinds(config.ddl)
        self.stats = SimStats(messages={p: 0 for p in range(config.partitions)})
        self._expected: ExpectedState | None = None
        self._used = False
        n = config.tables
        self._tables: list[_Table] = []
        for i in range(n):
            tpl = TEMPLATES[i % len(TEMPLATES)]
            suffix = "" if i < len(TEMPLATES) else f"_{i // len(TEMPLATES) + 1}"
            self._tables.append(_Table(tpl, tpl.table + suffix, list(tpl.columns)))
        self._rnd = random.Random(config.seed)
        self._ms = int(config.start_time.timestamp() * 1000)
        self._logical = 0
        self.ts = 0
        self._resolved = [0] * config.partitions
        self._history: list[deque[Event]] = [deque() for _ in range(config.partitions)]
        self._checkpoint = 0

    # -- public ---------------------------------------------------------------------------------
    @property
    def expected(self) -> ExpectedState:
        if self._expected is None:
            raise RuntimeError("the expected state is known once the stream has been fully iterated")
        return self._expected

    def events(self) -> Iterator[tuple[int, Event]]:
        """(partition, event) in emission order; per partition this is the Kafka order."""
        if self._used:
            raise RuntimeError("a Simulation is single-use: create a new one to iterate again")
        self._used = True
        yield from self._run()
        self._expected = self._final_state()

    def records(self) -> Iterator[SimMessage]:
        """Encoded Kafka records: rows batched per partition (up to ``max_batch_size``), every
        DDL and resolved event a message of its own, as TiCDC writes them."""
        cfg = self.config
        pending: list[list[RowChange]] = [[] for _ in range(cfg.partitions)]
        encoder = _Encoder(cfg.protocol, cfg.max_batch_size)
        for p, ev in self.events():
            if isinstance(ev, RowChange):
                rows = pending[p]
                rows.append(ev)
                if len(rows) >= cfg.max_batch_size:
                    yield from self._emit(p, encoder.rows(rows))
                    rows.clear()
                continue
            if pending[p]:
                yield from self._emit(p, encoder.rows(pending[p]))
                pending[p].clear()
            yield from self._emit(p, [encoder.single(ev)])
        for p, rows in enumerate(pending):
            if rows:
                yield from self._emit(p, encoder.rows(rows))

    def messages(self) -> Iterator[tuple[int, bytes | None, bytes]]:
        """(partition, key, value) of every Kafka record (``records()`` without timestamps)."""
        for m in self.records():
            yield m.partition, m.key, m.value

    # -- stream ---------------------------------------------------------------------------------
    def _emit(self, p: int, encoded: list[tuple[bytes | None, bytes]]) -> Iterator[SimMessage]:
        for key, value in encoded:
            self.stats.messages[p] += 1
            yield SimMessage(p, key, value, self._ms)

    def _tick(self) -> int:
        """The next commit ts: physical ms advances 0-5 ms, the logical part counts within one ms."""
        step = self._rnd.choice((0, 1, 1, 2, 3, 5))
        if step:
            self._ms += step
            self._logical = 0
        else:
            self._logical += 1
        self.ts = (self._ms << 18) | self._logical
        return self.ts

    def _plan(self) -> list[tuple[int, str, int]]:
        n = len(self._tables)
        plan: list[tuple[int, str, int]] = []
        for frac, kind, target in _DDL_PLAN:
            if kind not in self.ddl_kinds or (kind == "create_table" and n < 2):
                continue
            idx = n - 1 if target < 0 else target % n
            plan.append((int(frac * self.config.events), kind, idx))
            if kind == "drop_table":
                plan.append((int(0.8 * self.config.events), "recreate_table", idx))
        return sorted(plan, key=lambda x: x[0])

    def _run(self) -> Iterator[tuple[int, Event]]:
        cfg, rnd = self.config, self._rnd
        plan = deque(self._plan())
        late = {idx for _, kind, idx in plan if kind == "create_table"}
        if "create_schema" in self.ddl_kinds:
            for schema in dict.fromkeys(t.schema for t in self._tables):
                yield from self._ddl_event(schema, "", 1, f"CREATE DATABASE {quote(schema)}")
        for i, table in enumerate(self._tables):
            if i not in late:
                yield from self._create(table)
        restart_at = cfg.events // 2 if cfg.events >= 100 else -1
        while self.stats.row_changes < cfg.events:
            while plan and plan[0][0] <= self.stats.row_changes:
                _, kind, idx = plan.popleft()
                yield from self._apply_ddl(kind, self._tables[idx])
            yield from self._transaction()
            for p in range(cfg.partitions):
                if rnd.random() * cfg.resolved_every < 1:
                    yield from self._resolve(p)
            if restart_at >= 0 and self.stats.row_changes >= restart_at:
                restart_at = -1
                yield from self._restart()
            elif rnd.random() < cfg.restart_rate:
                yield from self._restart()
            elif rnd.random() < cfg.retry_rate:
                yield from self._retry()
        while plan:
            _, kind, idx = plan.popleft()
            yield from self._apply_ddl(kind, self._tables[idx])
        self._tick()
        for p in range(cfg.partitions):
            yield from self._resolve(p)

    def _send(self, p: int, ev: Event) -> Iterator[tuple[int, Event]]:
        self._history[p].append(ev)
        yield p, ev

    def _resolve(self, p: int) -> Iterator[tuple[int, Event]]:
        self._resolved[p] = self.ts
        self.stats.resolved += 1
        yield p, Resolved(self.ts)
        checkpoint = min(self._resolved)
        if checkpoint > self._checkpoint:
            self._checkpoint = checkpoint
            for hist in self._history:
                while hist and _ts(hist[0]) <= checkpoint:
                    hist.popleft()

    def _retry(self) -> Iterator[tuple[int, Event]]:
        """A producer retry: the last few events of one partition arrive a second time."""
        p = self._rnd.randrange(self.config.partitions)
        hist = self._history[p]
        if not hist:
            return
        k = self._rnd.randint(1, min(4, len(hist)))
        self.stats.retries += 1
        for ev in list(hist)[-k:]:
            self.stats.replayed_events += 1
            yield p, ev

    def _restart(self) -> Iterator[tuple[int, Event]]:
        """A changefeed restart: every partition re-sends all it sent after the checkpoint."""
        total = sum(len(h) for h in self._history)
        if total > 20_000:  # bound the blow-up of a pathological case
            yield from self._retry()
            return
        self.stats.restarts += 1
        for p, hist in enumerate(self._history):
            for ev in list(hist):
                self.stats.replayed_events += 1
                yield p, ev

    # -- DDL ------------------------------------------------------------------------------------
    def _ddl_event(self, schema: str, table: str, code: int, query: str) -> Iterator[tuple[int, Event]]:
        ddl = DdlEvent(self._tick(), schema, table, code, query)
        self.stats.ddl += 1
        for p in range(self.config.partitions):
            yield from self._send(p, ddl)

    def _create(self, table: _Table) -> Iterator[tuple[int, Event]]:
        table.live = True
        yield from self._ddl_event(table.schema, table.name, 3, table.create_sql())

    def _apply_ddl(self, kind: str, table: _Table) -> Iterator[tuple[int, Event]]:
        tpl = table.template
        if kind in ("create_table", "recreate_table"):
            if not table.live:
                table.clear()
                yield from self._create(table)
            return
        if not table.live:
            return
        if kind == "add_column":
            col = tpl.add_column
            if table.column_def(col.name) is None:
                yield from self._ddl_event(table.schema, table.name, 5,
                                           f"ALTER TABLE {table.qualified} ADD COLUMN {col.definition()}")
                table.set_columns([*table.columns, col])
                for row in table.rows.values():
                    row[col.name] = None
        elif kind == "modify_column":
            name, sql = tpl.modify
            old = table.column_def(name)
            if old is not None:
                new = column(name, sql, old.nullable)
                yield from self._ddl_event(table.schema, table.name, 12,
                                           f"ALTER TABLE {table.qualified} MODIFY COLUMN {new.definition()}")
                table.set_columns([new if c.name == name else c for c in table.columns])
        elif kind == "truncate":
            yield from self._ddl_event(table.schema, table.name, 11, f"TRUNCATE TABLE {table.qualified}")
            for key in table.rows:
                table.freed.append(key)
            table.clear()
        elif kind == "drop_column":
            name = tpl.drop_column
            if table.column_def(name) is not None and name not in table.key:
                yield from self._ddl_event(table.schema, table.name, 6,
                                           f"ALTER TABLE {table.qualified} DROP COLUMN {quote(name)}")
                table.set_columns([c for c in table.columns if c.name != name])
                for row in table.rows.values():
                    row.pop(name, None)
        elif kind == "drop_table":
            yield from self._ddl_event(table.schema, table.name, 4, f"DROP TABLE {table.qualified}")
            table.live = False
        elif kind == "rename_table":
            new_name = table.name + "_v2"
            old_qualified = table.qualified
            table.name = new_name
            yield from self._ddl_event(table.schema, new_name, 14,
                                       f"RENAME TABLE {old_qualified} TO {table.qualified}")
        else:  # pragma: no cover - the plan only holds known kinds
            raise AssertionError(kind)

    # -- rows -----------------------------------------------------------------------------------
    def _txn_size(self) -> int:
        r = self._rnd.random()
        if r < 0.4:
            n = 1
        elif r < 0.85:
            n = self._rnd.randint(2, 5)
        elif r < 0.98:
            n = self._rnd.randint(6, 20)
        else:
            n = self._rnd.randint(21, 60)
        return max(1, min(n, self.config.max_txn_rows, self.config.events - self.stats.row_changes))

    def _transaction(self) -> Iterator[tuple[int, Event]]:
        live = [t for t in self._tables if t.live]
        if not live:
            self._tick()
            return
        rnd = self._rnd
        ts = self._tick()
        weights = [t.template.weight for t in live]
        touched: set[tuple[str, tuple[Value, ...]]] = set()
        out: list[tuple[int, RowChange]] = []
        # Live rows per table: grows with the stream, capped so a million events stay in bounded memory.
        target = max(20, min(20_000, self.config.events // (len(self._tables) * 4)))
        for _ in range(self._txn_size()):
            table = rnd.choices(live, weights)[0]
            size = len(table.keys)
            p_insert = 1.0 if size == 0 else 0.6 if size < target // 2 else 0.35 if size < target else 0.12
            r = rnd.random()
            if r < p_insert:
                self._insert(table, ts, touched, out)
                continue
            key = table.keys.items[rnd.randrange(size)]
            if (table.name, key) in touched:
                continue  # TiDB sends one change per row per transaction
            r = rnd.random()
            if r < 0.7:
                self._update(table, ts, key, touched, out)
            elif r < 0.92:
                self._delete(table, ts, key, touched, out)
            else:
                self._change_key(table, ts, key, touched, out)
        self.stats.transactions += 1
        for p, ev in out:
            yield from self._send(p, ev)

    def _new_key(self, table: _Table, touched: set[tuple[str, tuple[Value, ...]]]) -> tuple[Value, ...]:
        rnd = self._rnd
        if table.freed and rnd.random() < 0.1:
            key = table.freed.popleft()  # re-insert a key deleted earlier
            if key not in table.rows and (table.name, key) not in touched:
                return key
        while True:
            table.counter += 1
            key = table.template.key_fn(rnd, table.counter)
            if key not in table.rows and (table.name, key) not in touched:
                return key

    def _route(self, table: _Table, key: tuple[Value, ...]) -> int:
        return _route(table.schema, table.name, key, self.config.partitions)

    def _count(self, attr: str) -> None:
        setattr(self.stats, attr, getattr(self.stats, attr) + 1)
        self.stats.row_changes += 1

    def _insert(self, table: _Table, ts: int, touched: set[tuple[str, tuple[Value, ...]]],
                out: list[tuple[int, RowChange]], key: tuple[Value, ...] | None = None,
                base: Mapping[str, Value] | None = None) -> None:
        key = key if key is not None else self._new_key(table, touched)
        rnd = self._rnd
        row = {c.name: (base[c.name] if base is not None and c.name in base else gen_value(c, rnd))
               for c in table.columns}
        row.update(zip(table.key, key, strict=True))
        table.rows[key] = row
        table.keys.add(key)
        touched.add((table.name, key))
        new = table.image(key, row)
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.INSERT, new)))
        self._count("inserts")

    def _update(self, table: _Table, ts: int, key: tuple[Value, ...],
                touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        rnd = self._rnd
        old_row = table.rows[key]
        old = table.image(key, old_row)
        row = dict(old_row)
        candidates = [c for c in table.columns if c.name not in table.key]
        changed = {c.name for c in rnd.sample(candidates, min(len(candidates), rnd.randint(1, 3)))}
        for c in table.columns:
            if c.name in changed:
                row[c.name] = gen_value(c, rnd)
        new = tuple(Column(n, code, flags, row[n]) if n in changed else prev
                    for (n, code, flags), prev in zip(table.shape, old, strict=True))
        table.rows[key] = row
        table.images[key] = new
        touched.add((table.name, key))
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.UPDATE, new, old)))
        self._count("updates")

    def _delete(self, table: _Table, ts: int, key: tuple[Value, ...],
                touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        old = table.image(key, table.rows[key])
        del table.rows[key]
        del table.images[key]
        table.keys.remove(key)
        table.freed.append(key)
        touched.add((table.name, key))
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.DELETE, (), old)))
        self._count("deletes")

    def _change_key(self, table: _Table, ts: int, key: tuple[Value, ...],
                    touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        """UPDATE ... SET pk = new: TiCDC sends a delete of the old key and an insert of the new one."""
        old = dict(table.rows[key])
        new_key = self._new_key(table, touched)
        self._delete(table, ts, key, touched, out)
        self._insert(table, ts, touched, out, key=new_key, base=old)
        # One upstream change, two row events (both count as row changes).
        self.stats.key_changes += 1
        self.stats.deletes -= 1
        self.stats.inserts -= 1

    # -- result ---------------------------------------------------------------------------------
    def _final_state(self) -> ExpectedState:
        tables: dict[str, list[dict[str, Any]]] = {}
        schemas: dict[str, dict[str, Any]] = {}
        for table in self._tables:
            if not table.live:
                continue
            name = f"{table.schema}.{table.name}"
            rows = [{c.name: table_value(c, row[c.name]) for c in table.columns}
                    for _, row in sorted(table.rows.items(), key=lambda kv: _sort_key(kv[0]))]
            tables[name] = rows
            schemas[name] = {"key": list(table.key), "columns": [[c.name, c.sql] for c in table.columns]}
        cfg = self.config
        generator = {"protocol": cfg.protocol, "seed": cfg.seed, "events": cfg.events, "partitions": cfg.partitions,
                     "tables": cfg.tables, "ddl": list(self.ddl_kinds), "start_time": cfg.start_time.isoformat(),
                     "max_batch_size": cfg.max_batch_size}
        return ExpectedState(tables, schemas, self.ts, generator, self.stats.to_json())


def _ts(ev: Event) -> int:
    return ev.ts if isinstance(ev, Resolved) else ev.commit_ts


def _sort_key(key: tuple[Value, ...]) -> tuple[tuple[int, Any], ...]:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)


class _Encoder:
    """Events -> (key, value) Kafka payloads in one protocol, with the project's own encoders."""

    def __init__(self, protocol: str, max_batch_size: int) -> None:
        self.protocol = protocol
        self.max_batch_size = max_batch_size
        if protocol == "open":
            from replicator.codec import open_protocol

            self._open = open_protocol
        else:
            from replicator.codec import craft

            self._craft = craft

    def rows(self, rows: Sequence[RowChange]) -> list[tuple[bytes | None, bytes]]:
        if self.protocol == "open":
            return list(self._open.encode_rows(rows, max_batch_size=self.max_batch_size))
        return [(None, v) for v in self._craft.encode_rows(rows, max_batch_size=self.max_batch_size)]

    def single(self, ev: Event) -> tuple[bytes | None, bytes]:
        if self.protocol == "open":
            return self._open.encode_ddl(ev) if isinstance(ev, DdlEvent) else self._open.encode_resolved(_ts(ev))
        if isinstance(ev, DdlEvent):
            return None, self._craft.encode_ddl(ev)
        return None, self._craft.encode_resolved(_ts(ev))


def generate(**kwargs: Any) -> Simulation:
    """``Simulation(SimConfig(**kwargs))``: iterate ``.messages()`` (partition, key, value), then
    read ``.expected``."""
    return Simulation(SimConfig(**kwargs))


def expected_state(config: SimConfig) -> ExpectedState:
    """The expected final state alone (generates the events without encoding them)."""
    sim = Simulation(config)
    for _ in sim.events():
        pass
    return sim.expected


# ---------------------------------------------------------------------------------------------
# Sinks: a Kafka topic or an archive directory.


@dataclass
class SinkReport:
    records: dict[int, int]
    elapsed_s: float
    target: str

    @property
    def total(self) -> int:
        return sum(self.records.values())


def ensure_topic(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions, or check that an existing one is empty and
    has that many (a simulated stream must be the whole topic for its expected state to hold)."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replicator-simulate",
                                 request_timeout_ms=int(timeout_s * 1000))
    except KafkaError as exc:
        raise ReplicatorError(f"cannot connect to Kafka at {bootstrap}: {exc}") from None
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                                timeout_ms=int(timeout_s * 1000))
        admin.wait_for_topics([topic], timeout_ms=int(timeout_s * 1000))
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout_s
        parts = consumer.partitions_for_topic(topic)
        while not parts and time.monotonic() < deadline:
            time.sleep(0.2)
            parts = consumer.partitions_for_topic(topic)
        if not parts:
            raise ReplicatorError(f"topic {topic!r} did not appear on {bootstrap}")
        if len(parts) != partitions:
            raise ConfigError(f"topic {topic!r} exists with {len(parts)} partitions, not --partitions {partitions}; "
                              "simulate into a new topic")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        if any(ends[tp] > begins[tp] for tp in tps):
            raise ConfigError(f"topic {topic!r} already holds records; simulate into a new (or empty) topic, "
                              "since its expected state describes the whole topic")
    finally:
        consumer.close()


def produce(sim: Simulation, bootstrap: str, topic: str, *, progress: Callable[[int], None] | None = None,
            create: bool = True) -> SinkReport:
    """Produce the stream into ``topic`` (created if missing): batched, lingering, idempotent (so
    per-partition order survives retries), acks=all; fails if any record was not acknowledged."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    if create:
        ensure_topic(bootstrap, topic, sim.config.partitions)
    started = time.monotonic()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                             max_request_size=32 << 20, enable_idempotence=True,
                             client_id="replicator-simulate")
    counts = {p: 0 for p in range(sim.config.partitions)}
    failures: list[BaseException] = []

    def failed(exc: BaseException) -> None:
        failures.append(exc)

    try:
        for i, m in enumerate(sim.records(), 1):
            producer.send(topic, key=m.key, value=m.value, partition=m.partition).add_errback(failed)
            counts[m.partition] += 1
            if progress is not None and i % 10_000 == 0:
                progress(i)
        producer.flush()
    except KafkaError as exc:
        raise ReplicatorError(f"producing to {topic!r} on {bootstrap} failed: {exc}") from None
    finally:
        producer.close()
    if failures:
        raise ReplicatorError(f"{len(failures)} record(s) were not acknowledged by {bootstrap}: {failures[0]}")
    return SinkReport(counts, time.monotonic() - started, f"topic {topic} on {bootstrap}")


def write_archive(sim: Simulation, directory: str | Path, topic: str, *, rotate_bytes: int | None = None) -> SinkReport:
    """Write the stream as a capture archive (the same frames ``replicator capture`` writes):
    offsets count from 0 per partition, timestamps are the simulated commit times."""
    from replicator.formats.archive import DEFAULT_ROTATE_BYTES, ArchiveWriter, list_archive_files

    out = Path(directory)
    if out.exists() and list_archive_files(out):
        raise ConfigError(f"{out} already holds archive files; simulate into a new directory")
    started = time.monotonic()
    counts = {p: 0 for p in range(sim.config.partitions)}
    with ArchiveWriter(out, rotate_bytes=rotate_bytes or DEFAULT_ROTATE_BYTES,
                       creator=f"replicator simulate seed={sim.config.seed}") as writer:
        for m in sim.records():
            writer.write_record(topic=topic, partition=m.partition, offset=counts[m.partition],
                                timestamp_ms=m.timestamp_ms, key=m.key, value=m.value, protocol=sim.config.protocol)
            counts[m.partition] += 1
    return SinkReport(counts, time.monotonic() - started, f"archive {out}")


# ---------------------------------------------------------------------------------------------
# CLI
