"""The simulator's column types and value generators.

Column types are parsed from the MySQL type text a template declares, so templates read like DDL;
each type knows what TiCDC puts on the wire for it (type code, flags). Values are mostly ordinary,
with a steady trickle of edge cases (extremes, empty strings, NULLs, odd unicode and bytes).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from replicator.codec.render import value_to_json
from replicator.events import Flag, TypeCode, Value

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
EPOCH_DAY: Final = dt.date(1970, 1, 1)


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
    return EPOCH_DAY + dt.timedelta(days=rnd.randint(0, 25_000) if r < 0.9 else rnd.randint(-700_000, 2_900_000))


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
