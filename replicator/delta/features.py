"""Which Delta table features a replicated table carries, and when it gets them.

Every reader feature shuts out some common reader ("reads" = returns the right rows; one-feature
tables, kept true by tests/integration/test_table_features.py; docs/table-features.md has the same table):

| reader feature | Spark | deltalake 1.6.6 QueryBuilder | deltalake to_pyarrow_table | polars 2.1.0 |
| --- | --- | --- | --- | --- |
| none (change data feed, column defaults: writer only) | yes | yes | yes | yes |
| columnMapping | yes | yes | no (all NULL) | no |
| deletionVectors | yes | yes | no | yes |
| typeWidening | yes | no | no | no |
| timestampNtz (DATETIME columns) | yes | yes | yes | yes |

Profiles (`--table-features`):
- `compatible` (default): CREATE TABLE sets only the change data feed; RENAME / DROP COLUMN and
  type changes of a table under `--rewrite-limit` rewrite it in one overwrite commit
  (replicator/delta/ddl/alter.py `_rewrite_table`) rather than enable column mapping or type
  widening, so every reader above reads it; at or over the limit they are metadata-only and the
  table gets the feature then (replicator/delta/schemachange.py, `--schema-change`). A table
  that already has a feature gets the DDL in place.
- `fast`: everything up front (column mapping, deletion vectors, type widening, CDF), as before.

A table keeps the features it has: the profile only decides what a table without them gets.
Enabling a feature is a Delta commit of its own, so it is check-before-alter (the table's live
properties are read first) and carries the step's `userMetadata`, like any DDL statement.

Pure: no Spark or Kafka import at module level (`tables` reads the protocol from the log files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, Literal, get_args

from replicator.delta.rowcount import last_checkpoint_version, log_names
from replicator.storage import Location, as_location

Profile = Literal["compatible", "fast"]
PROFILES: tuple[str, ...] = get_args(Profile)
DEFAULT_PROFILE: Profile = "compatible"

CDF = "delta.enableChangeDataFeed"
COLUMN_MAPPING = "delta.columnMapping.mode"
DELETION_VECTORS = "delta.enableDeletionVectors"
TYPE_WIDENING = "delta.enableTypeWidening"

FEATURE_PROPERTY: dict[str, tuple[str, str]] = {
    "columnMapping": (COLUMN_MAPPING, "name"),
    "deletionVectors": (DELETION_VECTORS, "true"),
    "typeWidening": (TYPE_WIDENING, "true"),
    "changeDataFeed": (CDF, "true"),
}
"""Table feature -> the table property that enables it (Delta upgrades the protocol with it)."""

PROFILE_PROPERTIES: dict[str, dict[str, str]] = {
    "compatible": {CDF: "true"},
    "fast": {COLUMN_MAPPING: "name", DELETION_VECTORS: "true", TYPE_WIDENING: "true", CDF: "true"},
}

READERS: dict[str, frozenset[str]] = {
    "spark": frozenset({"columnMapping", "deletionVectors", "typeWidening", "timestampNtz"}),
    "deltalake-sql": frozenset({"columnMapping", "deletionVectors", "timestampNtz"}),  # QueryBuilder (DataFusion)
    "deltalake-dataset": frozenset({"timestampNtz"}),  # DeltaTable.to_pyarrow_table() / to_pandas()
    "polars": frozenset({"deletionVectors", "timestampNtz"}),
}
"""Reader features each common reader reads (the table in the module doc); the names are the
`readers` of `replicator tables --json`."""


def check_profile(profile: str) -> Profile:
    """The profile name, or a ConfigError naming the choices."""
    from replicator.errors import ConfigError

    if profile not in PROFILES:
        raise ConfigError(f"--table-features {profile!r}: expected one of {', '.join(PROFILES)}")
    return profile  # type: ignore[return-value]


NAME_CHARS_NEEDING_MAPPING = frozenset(" ,;{}()\n\t=")
"""Characters Delta refuses in a column name unless column mapping is on
(DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES); TiDB allows every one of them."""


def needs_column_mapping(names: Iterable[str]) -> bool:
    """Whether Delta can store these column names only with column mapping."""
    return any(NAME_CHARS_NEEDING_MAPPING.intersection(name) for name in names)


def create_properties(profile: str, column_names: Iterable[str] = ()) -> dict[str, str]:
    """TBLPROPERTIES of a new table under `profile`: the profile's, plus column mapping when a
    column name needs it (the only way Delta stores such a name; the table then reads in Spark and
    deltalake's QueryBuilder, not polars)."""
    props = dict(PROFILE_PROPERTIES[check_profile(profile)])
    if needs_column_mapping(column_names):
        props[COLUMN_MAPPING] = "name"
    return props


def enabled(properties: dict[str, str], feature: str) -> bool:
    """Whether the table properties already enable `feature` (check-before-alter)."""
    key, value = FEATURE_PROPERTY[feature]
    current = properties.get(key)
    if current is None:
        return False
    if feature == "columnMapping":
        return current.lower() in ("name", "id")
    return current.lower() == value


def readers_of(features: list[str]) -> list[str]:
    """Common readers that can read a table with these reader features."""
    return [name for name, ok in READERS.items() if set(features) <= ok]


# -- the protocol, read from the log (no Spark) --------------------------------------------------

def _protocol_reader_features(protocol: dict[str, Any]) -> list[str]:
    """Reader features a protocol action requires: explicit at reader version 3, implied before."""
    version = int(protocol.get("minReaderVersion", 1))
    if version >= 3:
        return sorted(str(f) for f in protocol.get("readerFeatures") or [])
    return ["columnMapping"] if version == 2 else []


def _checkpoint_protocol(log_dir: Location, names: list[str]) -> tuple[int, dict[str, Any] | None]:
    """Version and protocol of the latest checkpoint named by `_last_checkpoint` (-1 when none),
    its files found among `names` (the log's listing from that checkpoint on)."""
    version = last_checkpoint_version(log_dir)
    if version is None:
        return -1, None
    import io

    import pyarrow.parquet as pq

    prefix = f"{version:020d}.checkpoint"
    for name in sorted(n for n in names if n.startswith(prefix) and n.endswith(".parquet")):
        data = (log_dir / name).read_bytes()
        for row in pq.read_table(io.BytesIO(data), columns=["protocol"]).column("protocol").to_pylist():
            if row is not None:
                return version, row
    return version, None


def reader_features(table_path: str | os.PathLike[str]) -> list[str]:
    """The reader features of a Delta table's latest protocol, from its `_delta_log` (any store)."""
    log_dir = as_location(table_path) / "_delta_log"
    names = log_names(log_dir)
    if not names:
        return []
    start, protocol = _checkpoint_protocol(log_dir, names)
    commits = sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit() and int(n[:-5]) > start)
    for version in commits:
        for line in (log_dir / f"{version:020d}.json").read_text().split("\n"):  # not U+2028 etc.
            if '"protocol"' in line:
                action = json.loads(line)
                if "protocol" in action:
                    protocol = action["protocol"]
    return _protocol_reader_features(protocol or {})
