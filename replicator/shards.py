"""Sharding a changefeed's tables across several replicators (`--shard I/N`): which shard owns a
table, and a table's identity across renames (pure: no Spark or Kafka).

A table's *identity* is the name the stream first showed it under, followed through RENAME
TABLE / RENAME TABLES; shard I of N owns the tables whose identity hashes (CRC-32 of the
lower-cased `schema NUL table`, stable across processes and Python versions) to I. So a rename
never moves a table between shards, and a table dropped and created again under the same name has
the same owner. The renames are read from the DDL stream, which every shard reads whole, so every
shard derives the same identities without talking to the others; each keeps the renames it has
read in its own state.json so that a restart decides as before.

Identities are versioned by commit ts: a rename at ts D changes the identity of its names from D
on, so a row at ts < D read late (another partition, a replay) still gets the identity it had.
A name renamed away is free again: a table created later under it is a new table whose identity
is that name.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from replicator.errors import ConfigError
from replicator.tables import TableName

Rename = tuple[TableName, TableName]

_SHARD: Final = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
USAGE: Final = "give --shard I/N with 0 <= I < N (e.g. --shard 0/3 for the first of 3 shards)"


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` of `count`."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ConfigError(f"--shard {self.index}/{self.count}: {USAGE}")

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """`I/N` -> ShardSpec; ConfigError (exit 2) saying what to write."""
        m = _SHARD.fullmatch(text)
        if m is None:
            raise ConfigError(f"--shard {text!r}: {USAGE}")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1 or index >= count:
            raise ConfigError(f"--shard {text!r}: {USAGE}")
        return cls(index, count)

    @property
    def label(self) -> str:
        """`I-of-N`: the shard's directory under `_replicator/shards/` and its consumer group's suffix."""
        return f"{self.index}-of-{self.count}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, identity: TableName) -> bool:
        return table_shard(identity, self.count) == self.index


def shard_setting(value: Any) -> Any:
    """The `shard` setting (flag, REPLICATOR_SHARD, `shard = "I/N"` in --config) -> ShardSpec;
    ValueError saying what to write (the settings name where it came from)."""
    if value is None or isinstance(value, ShardSpec):
        return value
    if not isinstance(value, str):
        raise ValueError(USAGE)
    try:
        return ShardSpec.parse(value)
    except ConfigError:
        raise ValueError(USAGE) from None


def _norm(name: TableName) -> TableName:
    return name[0].lower(), name[1].lower()


def table_shard(identity: TableName, count: int) -> int:
    """The shard of `count` that owns the table of this identity (stable hash; names ignore case,
    as TiDB compares them)."""
    schema, table = _norm(identity)
    return zlib.crc32(f"{schema}\x00{table}".encode()) % count


class Identities:
    """Each table name's identity at each commit ts, from the renames of the DDL stream.

    `rename` is idempotent (a DDL broadcast to every partition, a replay, a restart re-reading
    what the state already holds) and order-insensitive: a rename read after a later one rebuilds
    the index, so every shard ends with the same identities whatever order it read them in.
    """

    def __init__(self, renames: Iterable[tuple[int, Sequence[Rename]]] = ()) -> None:
        self._renames: dict[tuple[int, tuple[Rename, ...]], None] = {}
        self._index: dict[TableName, list[tuple[int, TableName]]] = {}
        self._last = 0
        for ts, pairs in renames:
            self._add(ts, pairs)
        self._rebuild()

    def __len__(self) -> int:
        return len(self._renames)

    def identity(self, schema: str, table: str, ts: int) -> TableName:
        """The identity of the table named schema.table at commit ts `ts` (its own name when no
        rename ever gave the name another)."""
        name = _norm((schema, table))
        entries = self._index.get(name)
        if not entries:
            return name
        i = bisect.bisect_right(entries, ts, key=lambda e: e[0])
        return entries[i - 1][1] if i else name

    def renamed(self, schema: str, table: str) -> bool:
        """True when some rename touches this name (its identity may differ at different ts)."""
        return _norm((schema, table)) in self._index

    def pair_identities(self, ts: int, pairs: Sequence[Rename]) -> list[TableName]:
        """The identity of the table each pair of a RENAME at `ts` moves, the pairs taken in order
        (`a TO tmp, b TO a, tmp TO b` moves a's table twice)."""
        overlay: dict[TableName, TableName] = {}
        out: list[TableName] = []
        for old, new in pairs:
            o, n = _norm(old), _norm(new)
            ident = overlay[o] if o in overlay else self.identity(*o, ts - 1)
            out.append(ident)
            if o != n:
                overlay[o], overlay[n] = o, ident
        return out

    def rename(self, ts: int, pairs: Sequence[Rename]) -> bool:
        """Record a RENAME TABLE(S) at commit ts `ts` (pairs applied in order, as TiDB does);
        False when it was already known."""
        key = self._add(ts, pairs)
        if key is None:
            return False
        if ts >= self._last:
            self._apply(*key)
            self._last = ts
        else:
            self._rebuild()
        return True

    def _add(self, ts: int, pairs: Sequence[Rename]) -> tuple[int, tuple[Rename, ...]] | None:
        key = (ts, tuple((_norm(old), _norm(new)) for old, new in pairs))
        if key in self._renames:
            return None
        self._renames[key] = None
        return key

    def _rebuild(self) -> None:
        self._index, self._last = {}, 0
        for ts, pairs in sorted(self._renames):
            self._apply(ts, pairs)
            self._last = ts

    def _apply(self, ts: int, pairs: tuple[Rename, ...]) -> None:
        overlay: dict[TableName, TableName] = {}

        def current(name: TableName) -> TableName:
            return overlay[name] if name in overlay else self.identity(*name, ts - 1)

        for old, new in pairs:
            if old == new:
                continue
            ident = current(old)
            overlay[old] = old  # free again: a table created under it later is a new one
            overlay[new] = ident
        for name, ident in overlay.items():
            if ident != self.identity(*name, ts - 1):
                entries = self._index.setdefault(name, [])
                entries[:] = [e for e in entries if e[0] != ts]
                entries.append((ts, ident))
                entries.sort(key=lambda e: e[0])

    def to_json(self) -> list[Any]:
        """The renames read, for state.json: `[[ts, [[old_schema, old_table, new_schema, new_table], ...]], ...]`."""
        return [[ts, [[*old, *new] for old, new in pairs]] for ts, pairs in sorted(self._renames)]

    @classmethod
    def from_json(cls, data: Iterable[Any]) -> Identities:
        return cls((int(ts), [((str(p[0]), str(p[1])), (str(p[2]), str(p[3]))) for p in pairs])
                   for ts, pairs in data)
