"""Tables registered in a catalog (a Hive metastore service): each live table as
`<prefix><schema>.<table>`, `USING delta LOCATION` its path, so readers find it by name
(`spark.table("shop.orders")`, SQL, BI tools) instead of by path.

The warehouse's own catalog (`State.tables`) stays the truth; the metastore is a projection of it,
reconciled by `CatalogSync.sync` at the start of a run and at the end of every step that changed
a table's name or existence (CREATE, RENAME, DROP, RECOVER, CREATE/DROP DATABASE, a table inferred
from rows), before that step's progress is committed. Reconciling rather than replaying each DDL
is what makes it idempotent on a rerun after a crash (whatever half of a step reached the
metastore) and what repairs a registration someone dropped by hand. Registrations are external
tables (`LOCATION`): dropping one never touches the files. A registration is the replicator's when
its location lies under the warehouse's `tables/`; any other table of the same name is left alone.

A shard (`--shard I/N`) registers its own tables only: the other shards' registrations (locations
under `tables/` that are not one of this shard's tables) are never dropped, and no shard drops a
database (another may be about to register a table in it). A name this shard's live table has is
re-pointed to it even when another shard registered it (a name renamed away and taken again by
a table of another shard; the shard still behind the rename re-points it back until it reads it).

A stale holder is kept out by the lease epoch (docs/object-store.md): every database whose
registrations a sync changes carries `replicator-epoch-<id>` (id: this warehouse's or shard's lease)
in its properties, and a sync that finds a newer epoch there stops (LeaseLostError) before
changing anything in it. The metastore has no conditional write, so this is checked, not enforced
by the store: what a stale holder changed in between is repaired by the current holder's next sync
(every step with DDL, and at least every RESYNC_EVERY_S), since the warehouse's state stays the truth.

Hive's metastore lower-cases names and accepts only letters, digits and `_` in them (Hive 2.3's
`MetaStoreUtils.validateName`); a table whose name it would refuse stays path-only, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.errors import CatalogError, ConfigError, LeaseLostError
from replicator.mysql.tokens import quote_ident
from replicator.runtime.spark import IMPLEMENTATION_CONF, URIS_CONF, session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.warehouse import State, TableEntry

log = logging.getLogger("replicator")

_HIVE_NAME = re.compile(r"[A-Za-z0-9_]+")
RESYNC_EVERY_S = 60.0
"""A step without DDL re-checks the registrations at most this often (a name dropped by hand
comes back within about a minute while a follower runs)."""


@dataclass(frozen=True)
class CatalogConfig:
    """Where tables are registered: the metastore's URI and a prefix for database names."""

    uri: str
    database_prefix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"uri": self.uri, "database_prefix": self.database_prefix}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CatalogConfig:
        return cls(str(data["uri"]), str(data.get("database_prefix") or ""))

    def database(self, schema: str) -> str:
        return f"{self.database_prefix}{schema}".lower()

    def name_of(self, schema: str, table: str) -> str | None:
        """`database.table` as the metastore holds it; None when it would refuse the name."""
        db = self.database(schema)
        if not (_HIVE_NAME.fullmatch(db) and _HIVE_NAME.fullmatch(table)):
            return None
        return f"{db}.{table.lower()}"


def uri_from_spark_conf(conf: Mapping[str, str]) -> str | None:
    """The metastore URI a `[spark]` table configures (Hive catalog and a URI both set), else None."""
    uri = conf.get(URIS_CONF, "").strip()
    if conf.get(IMPLEMENTATION_CONF, "").strip().lower() == "hive" and uri:
        return uri
    return None


def check_uri(uri: str) -> str:
    """A metastore URI as Hive takes it (`thrift://host:port`, comma-separated for several)."""
    text = uri.strip()
    if not text or not all(re.fullmatch(r"thrift://[^\s,/:]+:\d+/?", part.strip()) for part in text.split(",")):
        raise ConfigError(f"--catalog-uri {uri!r}: expected thrift://HOST:PORT (a Hive metastore service; "
                          "`make catalog-up` prints the local one's)")
    return text


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _location(text: str) -> str:
    """A location as a comparable string: `file:/x`, `file:///x` and `/x` are the same; no trailing /."""
    if text.startswith("file:"):
        text = "/" + text.removeprefix("file:").lstrip("/")
    return text.rstrip("/")


class CatalogSync:
    """Keeps a metastore's registrations equal to a warehouse's live tables (one Spark session
    whose catalog is that metastore)."""

    def __init__(self, spark: SparkSession, config: CatalogConfig, warehouse_root: str, *,
                 sharded: bool = False, epoch: Callable[[], int] | None = None, lease: str = "",
                 holds_lease: Callable[[], bool] | None = None) -> None:
        self.spark = spark
        self.config = config
        self.sharded = sharded
        self.epoch = epoch or (lambda: 0)  # 0: no lease (a tool), nothing checked or stamped
        # The property a database's epoch is kept in: one per lease, as shards and other warehouses
        # registering into the same database have epochs of their own.
        self.epoch_key = "replicator-epoch-" + hashlib.sha1(lease.encode()).hexdigest()[:12]
        # Whether the lease file still holds this run's take: a newer stamp while it does was left
        # by an earlier lease file at this path (a warehouse deleted and made again), not a holder.
        self.holds_lease = holds_lease
        self.tables_root = _location(warehouse_root) + "/tables/"
        self._synced_at = 0.0
        self._skipped: set[tuple[str, str]] = set()
        self.check_session()

    def check_session(self) -> None:
        """The session must have been started on this metastore: a catalog is a start-up setting."""
        conf = self.spark.conf
        impl = conf.get(IMPLEMENTATION_CONF, "in-memory")
        hadoop = self.spark.sparkContext._jsc.hadoopConfiguration()
        uris = conf.get(URIS_CONF, None) or hadoop.get("hive.metastore.uris")
        if impl != "hive" or (uris or "").strip() != self.config.uri:
            raise ConfigError(
                f"tables are to be registered in the metastore {self.config.uri}, but the Spark session was started "
                f"with {IMPLEMENTATION_CONF}={impl} and hive.metastore.uris={uris or 'unset'}: a catalog is chosen "
                "when the session starts, so run the replicator in its own process (or start the session with "
                f"{session_conf(self.config.uri)})")

    # -- the metastore --------------------------------------------------------------------------
    def _external(self) -> Any:
        return self.spark._jsparkSession.sessionState().catalog().externalCatalog()

    def _sql(self, statement: str) -> None:
        try:
            self.spark.sql(statement).collect()
        except Exception as exc:
            raise CatalogError(f"the metastore {self.config.uri} refused `{statement}`: "
                               f"{_first_line(exc)}; nothing is lost: run again once it is reachable") from None

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise CatalogError(f"the metastore {self.config.uri} failed to {what}: {_first_line(exc)}; "
                               "nothing is lost: run again once it is reachable") from None

    def _registered(self, db: str) -> set[str]:
        ext = self._external()
        if not self._call(f"look up database {db}", ext.databaseExists, db):
            return set()
        seq = self._call(f"list the tables of {db}", ext.listTables, db)
        return {str(seq.apply(i)) for i in range(seq.size())}

    def _location_of(self, db: str, table: str) -> str | None:
        table_meta = self._call(f"read {db}.{table}", self._external().getTable, db, table)
        location = table_meta.storage().locationUri()
        return _location(str(location.get())) if location.isDefined() else None

    def epoch_of(self, db: str) -> int:
        """The lease epoch this warehouse's runs last stamped on database `db` (0: none)."""
        props = self._call(f"read database {db}", self._external().getDatabase, db).properties()
        value = props.get(self.epoch_key)
        return int(str(value.get())) if value.isDefined() else 0

    def _guard(self, db: str, stamped: dict[str, int]) -> None:
        """Before the first change in `db` this sync: stop if a newer holder changed it."""
        mine = self.epoch()
        if not mine or db in stamped:
            return
        theirs = self.epoch_of(db)
        if theirs > mine and self.holds_lease is not None and self.holds_lease():
            log.warning("the catalog's database %s carries lease epoch %d of a warehouse at this path, this run's "
                        "is %d and the lease is still this run's: the warehouse was made again; its stamp is replaced",
                        db, theirs, mine)
            theirs = 0
        if theirs > mine:
            raise LeaseLostError(
                f"the catalog's database {db} was last changed under lease epoch {theirs} of this warehouse, this "
                f"run's is {mine}: a newer run holds the warehouse; this one stops without changing the catalog")
        stamped[db] = theirs

    def _stamp(self, db: str, stamped: dict[str, int]) -> None:
        mine = self.epoch()
        if mine and db in stamped and stamped[db] < mine:
            self._sql(f"ALTER DATABASE {quote_ident(db)} SET DBPROPERTIES ({_sql_string(self.epoch_key)} = "
                      f"{_sql_string(str(mine))})")
            stamped[db] = mine

    def _ours(self, location: str | None) -> bool:
        return location is not None and (location + "/").startswith(self.tables_root)

    # -- reconciling -----------------------------------------------------------------------------
    def due(self) -> bool:
        """Whether a step without name changes should re-check anyway (RESYNC_EVERY_S)."""
        return time.monotonic() - self._synced_at >= RESYNC_EVERY_S

    def sync(self, state: State, touched: Iterable[str] | None = None) -> list[str]:
        """Make the metastore hold exactly the live tables of `state` (under this prefix): register
        the missing ones, re-point ours whose location is not their table's (`touched` uids, or all
        when None), drop our registrations of names no live table has, create the databases of live
        schemas and drop the empty ones of schemas no longer live. Returns what it changed."""
        cfg, changes = self.config, []
        live: dict[tuple[str, str], TableEntry] = {}
        for entry in state.live_tables():
            name = cfg.name_of(entry.schema_name, entry.table)
            if name is None:
                if (entry.schema_name, entry.table) not in self._skipped:
                    self._skipped.add((entry.schema_name, entry.table))
                    log.warning("table %s.%s is not registered in the catalog: the metastore accepts only letters, "
                                "digits and _ in names; read it by path (%s)", entry.schema_name, entry.table,
                                entry.path, extra={"table": f"{entry.schema_name}.{entry.table}"})
                continue
            db, table = name.split(".", 1)
            live[(db, table)] = entry
        live_dbs = {cfg.database(s) for s in [*state.schemas, *(e.schema_name for e in state.live_tables())]}
        live_dbs = {db for db in live_dbs if _HIVE_NAME.fullmatch(db)}
        known_dbs = live_dbs | {db for db in (cfg.database(e.schema_name) for e in state.tables.values())
                                if _HIVE_NAME.fullmatch(db)}
        check = None if touched is None else set(touched)
        own = {_location(e.path) for e in state.tables.values()} if self.sharded else set()
        stamped: dict[str, int] = {}  # databases this sync changes: the epoch they had
        for db in sorted(known_dbs):
            registered = self._registered(db)
            for table in sorted(registered):
                wanted = live.get((db, table))
                if wanted is not None and check is not None and wanted.uid not in check:
                    continue  # registered, and this step did not change it
                location = self._location_of(db, table)
                if wanted is not None and location == _location(wanted.path):
                    continue
                if not self._ours(location):
                    if wanted is not None:
                        log.warning("%s.%s in the catalog is not this warehouse's table (location %s): left alone; "
                                    "the replicated table is at %s", db, table, location, wanted.path)
                        live.pop((db, table))
                    continue
                if wanted is None and self.sharded and location not in own:
                    continue  # another shard's table
                self._guard(db, stamped)
                self._sql(f"DROP TABLE IF EXISTS {quote_ident(db)}.{quote_ident(table)}")
                changes.append(f"unregistered {db}.{table}")
                registered.discard(table)
            if db in live_dbs:
                if not registered and not self._call(f"look up database {db}", self._external().databaseExists, db):
                    mine = self.epoch()
                    props = (f" WITH DBPROPERTIES ({_sql_string(self.epoch_key)} = {_sql_string(str(mine))})"
                             if mine else "")
                    self._sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(db)}{props}")  # stamped as it is made
                    changes.append(f"created database {db}")
                    # ours from its first statement (if another holder made it meanwhile, the next sync checks)
                    stamped[db] = mine
                for (ldb, table), entry in sorted(live.items()):
                    if ldb == db and table not in registered:
                        self._guard(db, stamped)
                        self._sql(f"CREATE TABLE IF NOT EXISTS {quote_ident(db)}.{quote_ident(table)} USING delta "
                                  f"LOCATION {_sql_string(entry.path)}")
                        changes.append(f"registered {db}.{table}")
            elif not registered and not self.sharded and \
                    self._call(f"look up database {db}", self._external().databaseExists, db):
                self._guard(db, stamped)
                self._sql(f"DROP DATABASE IF EXISTS {quote_ident(db)}")  # RESTRICT: only when empty
                changes.append(f"dropped database {db}")
                continue
            self._stamp(db, stamped)
        self._synced_at = time.monotonic()
        if changes:
            log.info("catalog %s: %s", cfg.uri, "; ".join(changes))
        return changes


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    return (lines[0] if lines else type(exc).__name__)[:300]
