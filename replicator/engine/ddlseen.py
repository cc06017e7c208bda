"""What the table filter (filtering.py) and the shard filter (sharding.py) both need of a DDL
before deciding whether it is theirs: whether it was seen before (a DDL comes once per partition
and again on replays: counted and logged once), a RENAME's pairs with their schemas resolved as
its applier resolves them, and a RENAME cut to the pairs a filter keeps.

Pure: no Spark or Kafka.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent
from replicator.mysql.statements import parse_renames
from replicator.mysql.tokens import quote_ident
from replicator.shards import Rename

SEEN_DDLS = 10_000
"""DDLs remembered to count each once (broadcast copies arrive close together)."""


class SeenDdls:
    """The DDLs seen lately, by (commit ts, query): at most SEEN_DDLS, the oldest forgotten first."""

    def __init__(self, limit: int = SEEN_DDLS) -> None:
        self.limit = limit
        self._seen: dict[tuple[int, str], None] = {}

    def first(self, ddl: DdlEvent) -> bool:
        """Whether this is the first copy of `ddl` seen (and remember it)."""
        key = (ddl.commit_ts, ddl.query)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self.limit:
            del self._seen[next(iter(self._seen))]
        return True


def rename_pairs(ddl: DdlEvent) -> list[Rename] | None:
    """A RENAME TABLE(S)'s (old, new) pairs, each name with its schema (an old name without one is
    in the DDL's schema, a new one in its old name's); None for any other DDL, or one its applier
    cannot read either (the applier reports that one)."""
    if ddl.ddl_type != DdlCode.RENAME_TABLE:
        return None
    try:
        pairs = parse_renames(ddl.query)
    except DdlError:
        return None
    out: list[Rename] = []
    for (old_schema, old_table), (new_schema, new_table) in pairs:
        out.append(((old_schema or ddl.schema, old_table), (new_schema or old_schema or ddl.schema, new_table)))
    return out


def cut_rename(ddl: DdlEvent, kept: Sequence[Rename]) -> DdlEvent:
    """The RENAME `ddl` cut to the pairs `kept`, each name backtick-quoted (upstream names are
    untrusted; MySQL quotes as Spark SQL does)."""
    q = quote_ident
    query = "RENAME TABLE " + ", ".join(f"{q(o[0])}.{q(o[1])} TO {q(n[0])}.{q(n[1])}" for o, n in kept)
    return dataclasses.replace(ddl, query=query, ddl_type=int(DdlCode.RENAME_TABLE))
