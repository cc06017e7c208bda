"""Tables registered in a real Hive metastore service (replicator/delta/catalog.py), seen by name from
another process while a follower runs.

The follower (`replicator run --catalog-uri`) and the reader (`tests/integration/catalog_reader.py`,
opening the warehouse as a notebook does) are processes of their own: Spark picks its catalog when
a session starts, and the suite's shared session has none. Expected contents come from a plain
model of the upstream history written out by hand.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from replicator.cli import main
from replicator.codec.open_protocol import encode_ddl, encode_resolved, encode_rows
from replicator.events import Column, DdlEvent, Flag, Op, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.s3_fixtures import S3Server
from tests.support.cli import kill_group, replicator_argv, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
PK = Flag.HANDLE_KEY | Flag.PRIMARY_KEY


class Stream:
    """Upstream history as Open Protocol records on 2 partitions: rows routed by key, DDL and
    resolved ts broadcast; `model` is what each live table must hold afterwards."""

    def __init__(self) -> None:
        self.ts = itertools.count(451_000_000_000_000_000, 1 << 18)
        self.records: list[tuple[int, bytes, bytes]] = []
        self.model: dict[str, dict[int, str]] = {}
        self.last = 0

    def ddl(self, schema: str, table: str, code: int, query: str) -> None:
        ev = DdlEvent(next(self.ts), schema, table, code, query)
        self.records += [(p, *encode_ddl(ev)) for p in (0, 1)]
        self.resolve()

    def create(self, schema: str, table: str) -> None:
        self.ddl(schema, table, 3, f"CREATE TABLE `{schema}`.`{table}` (id INT PRIMARY KEY, v VARCHAR(20))")
        self.model[f"{schema}.{table}"] = {}

    def put(self, schema: str, table: str, *rows: tuple[int, str]) -> None:
        ts = next(self.ts)
        for id_, v in rows:
            cols = (Column("id", TypeCode.LONG, PK, id_), Column("v", TypeCode.VARCHAR, 0, v))
            change = RowChange(ts, schema, table, Op.INSERT, cols, ())
            self.records += [(id_ % 2, k, val) for k, val in encode_rows([change])]
            self.model[f"{schema}.{table}"][id_] = v
        self.resolve()

    def delete(self, schema: str, table: str, id_: int) -> None:
        cols = (Column("id", TypeCode.LONG, PK, id_), Column("v", TypeCode.VARCHAR, 0, None))
        change = RowChange(next(self.ts), schema, table, Op.DELETE, (), cols)
        self.records += [(id_ % 2, k, val) for k, val in encode_rows([change])]
        del self.model[f"{schema}.{table}"][id_]
        self.resolve()

    def resolve(self) -> None:
        self.last = next(self.ts)
        self.records += [(p, *encode_resolved(self.last)) for p in (0, 1)]

    def flush(self) -> list[tuple[int, bytes, bytes]]:
        out, self.records = self.records, []
        return out


def expected(model: dict[str, dict[int, str]], prefix: str) -> dict[str, Any]:
    """The reader's view of the model: the databases `<prefix><schema>` of live tables, and each
    table `<prefix><schema>.<table>` with its rows as sorted JSON."""
    return {"databases": sorted({f"{prefix}{name.split('.')[0]}" for name in model}),
            "tables": {f"{prefix}{name}": sorted(json.dumps({"id": k, "v": v}, sort_keys=True) for k, v in rows.items())
                       for name, rows in model.items()}}


class Reader:
    """The other process: `catalog_reader`, one JSON answer per command."""

    def __init__(self, warehouse: Path | str, log: Path, **env: str) -> None:
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.catalog_reader", str(warehouse)], cwd=REPO_ROOT,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=cli_env(**env),
                start_new_session=True, text=True)

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the reader stopped:\n{tail(self.log)}"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)  # type: ignore[arg-type]


def recorded_catalog(wh: Path) -> dict[str, str] | None:
    return Warehouse(wh).load_state().catalog if (wh / "_replicator" / "state.json").exists() else None


def test_catalog_follows_create_rename_drop_recover_and_serves_another_process(
        kafka_bootstrap: str, catalog_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    st = Stream()
    st.ddl("shop", "", 1, "CREATE DATABASE `shop`")
    for table, rows in (("orders", [(1, "a"), (2, "b"), (3, "c")]), ("items", [(10, "x"), (11, "y")]),
                        ("tmp", [(20, "t")]), ("gone", [(30, "g"), (31, "h")])):
        st.create("shop", table)
        st.put("shop", table, *rows)
    st.ddl("shop", "gone", 4, "DROP TABLE `shop`.`gone`")
    gone = st.model.pop("shop.gone")
    st.ddl("old", "", 1, "CREATE DATABASE `old`")
    st.create("old", "t")
    st.put("old", "t", (40, "o"))
    first_watermark = st.last
    topic = new_topic(kafka_bootstrap, 2, prefix="catalog")
    produce(kafka_bootstrap, topic, st.flush())
    wh, log = tmp_path / "wh", tmp_path / "follower.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                          "--protocol", "open", "--warehouse", str(wh), "--catalog-uri", catalog_uri,
                          "--catalog-database-prefix", prefix)
    with open(log, "wb") as err:
        follower = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=cli_env(), start_new_session=True)
    reader: Reader | None = None
    try:
        # The follower records the catalog in the warehouse before it registers anything; the other
        # process opens the warehouse as soon as it does (both JVMs start at once).
        wait_for("the follower to record the catalog",
                 lambda: follower.poll() is not None or recorded_catalog(wh) is not None, timeout=120)
        assert follower.poll() is None, f"the follower stopped:\n{tail(log)}"
        reader = Reader(wh, tmp_path / "reader.log")
        wait_for("the follower to apply the first burst",
                 lambda: follower.poll() is not None or applied_ts(wh) >= first_watermark, timeout=300)
        assert follower.poll() is None, f"the follower stopped:\n{tail(log)}"

        # Another process, connected to the metastore the warehouse records, sees exactly the live
        # tables by name, with their rows (not the dropped one).
        assert reader.ask("") == {"ready": True}
        assert reader.ask("name shop.items") == {"name": f"{prefix}shop.items", "uses_catalog": True}
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)

        # Renamed, dropped, recovered, a schema dropped, and a registration dropped by hand: all
        # followed by the next DDL step, while the follower runs.
        assert reader.ask(f"drop `{prefix}shop`.`orders`") == {"dropped": f"`{prefix}shop`.`orders`"}
        assert f"{prefix}shop.orders" not in reader.ask(f"look {prefix}")["tables"]
        st.ddl("shop", "goods", 14, "RENAME TABLE `shop`.`items` TO `shop`.`goods`")
        st.model["shop.goods"] = st.model.pop("shop.items")
        st.ddl("shop", "tmp", 4, "DROP TABLE `shop`.`tmp`")
        del st.model["shop.tmp"]
        st.ddl("shop", "gone", 25, "RECOVER TABLE `shop`.`gone`")
        st.model["shop.gone"] = gone
        st.put("shop", "gone", (30, "G"))
        st.ddl("old", "", 2, "DROP DATABASE `old`")
        del st.model["old.t"]
        st.put("shop", "orders", (2, "B"), (4, "d"))
        st.delete("shop", "orders", 3)
        st.create("shop", "late")
        st.put("shop", "late", (50, "l"))
        produce(kafka_bootstrap, topic, st.flush())
        wait_for("the follower to apply the second burst",
                 lambda: follower.poll() is not None or applied_ts(wh) >= st.last, timeout=300)
        assert follower.poll() is None, f"the follower stopped:\n{tail(log)}"
        seen = reader.ask(f"look {prefix}")
        assert seen == expected(st.model, prefix)
        assert f"{prefix}old" not in seen["databases"] and f"{prefix}shop.items" not in seen["tables"]

        follower.send_signal(signal.SIGTERM)
        assert follower.wait(timeout=120) == 0, tail(log)

        # A later scheduled run, without the flag, uses the catalog the warehouse records and
        # repairs at its start what was dropped by hand meanwhile (it has nothing to apply).
        assert reader.ask(f"drop `{prefix}shop`.`goods`") == {"dropped": f"`{prefix}shop`.`goods`"}
        again = [a for a in cmd if a not in ("--catalog-uri", catalog_uri, "--catalog-database-prefix", prefix)]
        with open(log, "ab") as err:
            rerun = subprocess.run([*again, "--until-caught-up"], stdout=subprocess.DEVNULL, stderr=err,
                                   env=cli_env(), timeout=300, check=False)
        assert rerun.returncode == 0, tail(log)
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)

        # Every change carries the lease epoch of the run that made it (the follower's take was 1,
        # the rerun's 2, and the rerun re-registered shop.goods): a stale holder's late sync is
        # refused before it changes anything, and the current holder's goes on.
        assert reader.ask(f"epoch {prefix}shop") == {"epoch": 2}
        assert reader.ask(f"drop `{prefix}shop`.`goods`") == {"dropped": f"`{prefix}shop`.`goods`"}
        assert "lease epoch 2" in reader.ask("sync 1")["refused"]
        assert f"{prefix}shop.goods" not in reader.ask(f"look {prefix}")["tables"], "the stale sync changed nothing"
        assert reader.ask("sync 2") == {"changes": [f"registered {prefix}shop.goods"]}
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)

        # The lease file made again (a warehouse deleted and made again at this path): the next
        # take is epoch 1, under the catalog's 2, while the lease file is that run's own. The stamp
        # is then an earlier lease's, not a newer holder's: replaced, and the run goes on.
        (wh / "_replicator" / "lease.json").unlink()
        assert reader.ask(f"drop `{prefix}shop`.`goods`") == {"dropped": f"`{prefix}shop`.`goods`"}
        with open(log, "ab") as err:
            remade = subprocess.run([*again, "--until-caught-up"], stdout=subprocess.DEVNULL, stderr=err,
                                    env=cli_env(), timeout=300, check=False)
        assert remade.returncode == 0, tail(log)
        assert reader.ask(f"epoch {prefix}shop") == {"epoch": 1}
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)
    finally:
        if reader is not None:
            reader.close()
        if follower.poll() is None:
            kill_group(follower)

    # `replicator tables` names each table's registration; the warehouse records the catalog.
    assert main(["tables", "--warehouse", str(wh), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {f"{r['schema']}.{r['table']}": r["catalog"] for r in listed} == {
        name: f"{prefix}{name}" for name in st.model}
    assert Warehouse(wh).load_state().catalog == {"uri": catalog_uri, "database_prefix": prefix}


@pytest.mark.soak  # two Spark processes and the S3 server: `make soak`; the local twin above runs in CI
def test_catalog_registers_tables_of_an_s3a_warehouse(kafka_bootstrap: str, catalog_uri: str, s3_server: S3Server,
                                                       tmp_path: Path) -> None:
    """A warehouse on object storage: the registrations' LOCATION is the s3a:// path, and another
    process reads the tables by name through it."""
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    st = Stream()
    st.create("shop", "orders")
    st.put("shop", "orders", (1, "a"), (2, "b"))
    st.create("shop", "items")
    st.put("shop", "items", (10, "x"))
    st.ddl("shop", "goods", 14, "RENAME TABLE `shop`.`items` TO `shop`.`goods`")
    st.model["shop.goods"] = st.model.pop("shop.items")
    topic = new_topic(kafka_bootstrap, 2, prefix="catalog-s3")
    produce(kafka_bootstrap, topic, st.flush())
    wh, log = s3_server.warehouse_url("catalog"), tmp_path / "run.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                          "--protocol", "open", "--warehouse", wh, "--until-caught-up", "--catalog-uri", catalog_uri,
                          "--catalog-database-prefix", prefix)
    with open(log, "wb") as err:
        run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, env=cli_env(**s3_server.env()),
                             timeout=300, check=False)
    assert run.returncode == 0, tail(log)
    reader = Reader(wh, tmp_path / "reader.log", **s3_server.env())
    try:
        assert reader.ask("") == {"ready": True}
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)
    finally:
        reader.close()


def test_shards_register_their_own_tables_and_leave_the_others(kafka_bootstrap: str, catalog_uri: str,
                                                              tmp_path: Path) -> None:
    """Two shards on one warehouse and one metastore: each registers its own tables and never
    unregisters the other's, also after a rename to a name that hashes to the other shard
    (shop.orders, shard 0's, renamed to shop.orders_v2) and a drop; a notebook's process reads
    every shard's tables by name."""
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    st = Stream()
    for table, rows in (("orders", [(1, "a"), (2, "b")]), ("tmp", [(20, "t")]),  # shard 0 of 2
                        ("items", [(10, "x")]), ("users", [(30, "u"), (31, "v")])):  # shard 1 of 2
        st.create("shop", table)
        st.put("shop", table, *rows)
    topic = new_topic(kafka_bootstrap, 2, prefix="catalog-shards")
    produce(kafka_bootstrap, topic, st.flush())
    wh, log = tmp_path / "wh", tmp_path / "runs.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                          "--warehouse", str(wh), "--until-caught-up", "--catalog-uri", catalog_uri,
                          "--catalog-database-prefix", prefix)

    def run(*shards: int) -> None:
        with open(log, "ab") as err:
            procs = [subprocess.Popen([*cmd, "--shard", f"{i}/2"], stdout=subprocess.DEVNULL, stderr=err,
                                      env=cli_env(), start_new_session=True) for i in shards]
            codes = [p.wait(timeout=300) for p in procs]
        assert codes == [0] * len(shards), tail(log)

    run(0, 1)  # side by side: both create the database, each registers its two tables
    st.ddl("shop", "orders_v2", 14, "RENAME TABLE `shop`.`orders` TO `shop`.`orders_v2`")
    st.model["shop.orders_v2"] = st.model.pop("shop.orders")
    st.put("shop", "orders_v2", (3, "c"))
    st.ddl("shop", "tmp", 4, "DROP TABLE `shop`.`tmp`")
    del st.model["shop.tmp"]
    produce(kafka_bootstrap, topic, st.flush())
    run(0, 1)  # shard 0 renames and drops its own; neither drops the other's registrations (orders_v2, a
    # name that hashes to shard 1, is shard 0's table)
    reader = Reader(wh, tmp_path / "reader.log")
    try:
        assert reader.ask("") == {"ready": True}
        assert reader.ask(f"look {prefix}") == expected(st.model, prefix)
        assert reader.ask("name shop.orders_v2") == {"name": f"{prefix}shop.orders_v2", "uses_catalog": True}
    finally:
        reader.close()
