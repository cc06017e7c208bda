"""Rewrite or metadata-only: how a RENAME / DROP COLUMN or a type change reaches a `compatible` table.

A rewrite (`replicator/delta/ddl/alter.py` `_rewrite_table`) keeps the table readable by every
reader (features.READERS) but copies all of its data and shows every row in the change data feed
as deleted and re-inserted. A metadata-only change (column mapping, Delta type widening) commits
no data file and no row change, but shuts out some readers. The choice is per table and per DDL:

- `--schema-change rewrite`: always rewrite (as before this option existed);
- `--schema-change metadata`: always metadata-only where Delta can do it;
- `--schema-change auto` (default): metadata-only when the table's live data files (from its
  Delta snapshot's checksum, else `rowcount.live_bytes`) hold at least `--rewrite-limit` bytes,
  else rewrite.

A table that already has the feature gets the change in place whatever the choice (its readers
do not change), and the `fast` profile has every feature up front. A type change that Delta's
type widening does not cover cannot be metadata-only: it is rewritten under every choice, and the
DDL's outcome says so.

Pure: no Spark import (the caller measures the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from replicator.errors import ConfigError

SchemaChange = Literal["auto", "rewrite", "metadata"]
SCHEMA_CHANGES: tuple[str, ...] = get_args(SchemaChange)
DEFAULT_SCHEMA_CHANGE: SchemaChange = "auto"

DEFAULT_REWRITE_LIMIT = 1024 ** 3
"""1 GiB of live data files. Measured (`python -m bench.schema`, docs/schema-change.md):
RENAME COLUMN on a 10,000,000-row table of 510 MiB took 82 s as a rewrite (6.2 MiB/s on
the shared 2-core machine) and 1.0 s metadata-only; the rewrite grows with the table's bytes, the
metadata-only change does not. At 1 GiB a rewrite holds the table's replication for about three
minutes there (less on more cores), a pause still worth keeping every reader for; beyond it the
rewrite's time and copy grow without bound while the metadata-only change stays a second."""

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2,
          "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3, "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: object, what: str = "--rewrite-limit") -> int:
    """A byte count (`1048576`) or a size (`512MiB`, `1GiB`, `1.5GB`; KiB/MiB/GiB/TiB are powers of
    1024, KB/MB/GB/TB of 1000) as bytes; a ConfigError saying what is wrong and what to write."""
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a byte count or a size such as 1GiB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{what}: a size cannot be negative (got {value}); give bytes or e.g. 1GiB")
        return value
    text = str(value)
    m = _SIZE.match(text)
    unit = m[2].lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"{what}: {text!r} is not a size; give a byte count (1048576) or a number with a unit "
                          "(B, KiB, MiB, GiB, TiB or KB, MB, GB, TB), e.g. 1GiB")
    return int(float(m[1]) * _UNITS[unit])


def format_size(n: int) -> str:
    """Bytes as a short binary size (`1 GiB`, `3.2 MiB`, `512 B`)."""
    for unit, size in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} B"


def check_schema_change(mode: str) -> SchemaChange:
    if mode not in SCHEMA_CHANGES:
        raise ConfigError(f"--schema-change {mode!r}: expected one of {', '.join(SCHEMA_CHANGES)}")
    return mode  # type: ignore[return-value]


@dataclass(frozen=True)
class Choice:
    """What one DDL does to one table: `metadata` (metadata-only) or `rewrite`, and why."""

    metadata: bool
    why: str


def choose(mode: SchemaChange, limit: int, size: int | None) -> Choice:
    """The choice for a table of `size` live bytes (None: unknown, counted as at the limit)."""
    if mode == "rewrite":
        return Choice(False, "--schema-change rewrite")
    if mode == "metadata":
        return Choice(True, "--schema-change metadata")
    if size is None:
        return Choice(True, "table size unknown (counted as at --rewrite-limit)")
    if size >= limit:
        return Choice(True, f"table holds {format_size(size)} of live data files, at or over "
                            f"--rewrite-limit {format_size(limit)}")
    return Choice(False, f"table holds {format_size(size)} of live data files, under --rewrite-limit "
                         f"{format_size(limit)}")
