"""Table templates: the model upstream's schema, and what each DDL kind does to each table."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from replicator.errors import ConfigError
from replicator.events import Value
from replicator.sim.columns import EPOCH_DAY, ColumnDef, column

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
    return (f"{word}#{n}", EPOCH_DAY + dt.timedelta(days=18_000 + rnd.randint(0, 3000)))


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
DDL_PLAN: Final = (
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
