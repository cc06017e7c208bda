"""One writer, enforced by the store (docs/object-store.md "Two writers").

* Two processes write the same Delta commit versions at the same instants through the s3a commit
  store: exactly one wins each round, and the file holds the winner's bytes.
* A holder whose whole process group is stopped in the middle of a MERGE is taken over; the taker
  finishes the stream; the resumed holder commits nothing more and stops: the tables, their Delta
  history, the step log and state.json agree, and every row is exact.
* A late write of state.json or of a step-log segment from a holder that lost the lease is refused
  by the store (local directory and S3 alike); one that lands before the new holder's first write
  is written over by it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.errors import LeaseLostError
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.storage import fileio_for
from replicator.warehouse import State, Warehouse
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.reliability.common import size
from tests.s3_fixtures import S3Server
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(900)]

ROUNDS = 200


@pytest.fixture(params=["local", "s3"])
def warehouse_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "local":
        yield str(tmp_path / "wh")
    else:
        s3: S3Server = request.getfixturevalue("s3_store")
        yield s3.warehouse_url("fenced")


def _holder(url: str, seconds: float) -> tuple[Warehouse, Any]:
    wh = Warehouse(url, lease_seconds=seconds)
    ctx = wh.locked()
    ctx.__enter__()
    return wh, ctx


def _paused(wh: Warehouse) -> None:
    """As if the holder had checked its lease just before a pause: its renewals stop, its own check
    passes, so only the store can refuse what it writes next."""
    assert wh.lease is not None
    wh.lease._stop.set()  # private: a pause, inside one process
    wh.lease.check = lambda: None  # type: ignore[method-assign]


def _step(n: int) -> dict[str, Any]:
    return {"step": n, "watermark": n * 10, "tables": {}}


def test_a_lost_holders_late_writes_are_refused_by_the_store(warehouse_url: str) -> None:
    a, a_ctx = _holder(warehouse_url, 2.0)
    state = a.load_state()
    state.steps = 1
    a.save_state(state)
    a.log_step(_step(1))
    _paused(a)

    b = Warehouse(warehouse_url, lease_seconds=30)
    with b.locked(wait=True, timeout=30):  # once A's term and the grace have passed
        state_b = b.load_state()
        assert state_b.steps == 1
        state_b.steps = 2
        b.save_state(state_b)
        b.log_step(_step(2))
        taken = b.io.read(b.state_path.path)

        late = State(steps=9)  # A stale idea of progress
        with pytest.raises(LeaseLostError, match="no longer holds"):
            a.save_state(late)
        assert b.io.read(b.state_path.path) == taken, "a lost holder's state.json landed over the new holder's"
        if not a.io.can_append:  # segments: conditional too (a local log is appended in place)
            with pytest.raises(LeaseLostError, match="no longer holds"):
                a.log_step(_step(9))
        assert [r["step"] for r in b.windows()] == [1, 2]
        b.save_state(state_b)  # the holder goes on
        assert not [n for n in b.io.children(b.meta.path) if "probe" in n], "the conditional-write probe is removed"
    a.lease = None
    a_ctx.__exit__(None, None, None)


def test_a_late_write_before_the_new_holders_first_is_written_over(warehouse_url: str) -> None:
    a, a_ctx = _holder(warehouse_url, 2.0)
    state = a.load_state()
    state.steps = 1
    a.save_state(state)
    _paused(a)
    b = Warehouse(warehouse_url, lease_seconds=30)
    with b.locked(wait=True, timeout=30):
        state_b = b.load_state()
        a.save_state(State(steps=7))  # lands: B has not written yet
        state_b.steps = 2
        b.save_state(state_b)  # refused once, B still holds the lease: written over A's
        assert b.load_state().steps == 2
        assert b.writer is not None and b.writer.refusals == 1
    a.lease = None
    a_ctx.__exit__(None, None, None)


def test_two_processes_writing_the_same_commit_versions_never_both_win(s3_store: S3Server) -> None:
    log_dir = f"{s3_store.warehouse_url('race')}/t/_delta_log"
    procs = [subprocess.Popen([sys.executable, "-m", "tests.reliability.commit_race", log_dir, name, str(ROUNDS)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=cli_env(**s3_store.env()), cwd=Path(__file__).resolve().parents[2], text=True)
             for name in ("a", "b")]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        start = time.time() + 2.0
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{start} 0.08\n")
            p.stdin.flush()
        results = {}
        for p in procs:
            out, _ = p.communicate(timeout=300)
            results[json.loads(out.strip().splitlines()[-1])["name"]] = json.loads(out.strip().splitlines()[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    a, b = results["a"], results["b"]
    assert a["other"] == [] and b["other"] == []
    assert not set(a["won"]) & set(b["won"]), "two writers won the same commit version"
    assert sorted(a["won"] + b["won"]) == list(range(ROUNDS)), "a round with no winner"
    assert a["raced"] + b["raced"] == ROUNDS
    io = fileio_for(log_dir)
    for i in range(ROUNDS):
        data = io.read(f"{log_dir}/{i:020d}.json")
        assert data is not None
        writer = json.loads(data)["commitInfo"]["writer"]
        assert i in results[writer]["won"], f"round {i}: the file holds {writer}'s commit, which lost"
    print(f"\n{ROUNDS} rounds: a won {len(a['won'])}, b won {len(b['won'])}; never both; lag {a['lag']} {b['lag']}")


@pytest.mark.soak  # two JVM starts, a lease term and a pause on the store: `make soak` (its twins above run in CI)
@pytest.mark.parametrize("fault", ["mid_merge:3:0.2", "before_commit_put:8"])
def test_a_holder_stopped_mid_merge_is_taken_over_and_commits_nothing_more(
        s3_store: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path, fault: str) -> None:
    """Stopped during a MERGE, or (issue 50, item 7c) in the driver JVM right before a commit PUT
    whose fence and pin checks passed: the resumed PUT is refused by the store (the taker wrote
    that version) and the holder stops; nothing it writes lands after the taker's."""
    sim = Simulation(SimConfig(protocol="craft", seed=91, events=160, partitions=2, tables=3, ddl="auto"))
    topic = new_topic(kafka_bootstrap, 2, prefix="fenced")
    produce(kafka_bootstrap, topic, list(sim.messages()))
    url, log_a, log_b = s3_store.warehouse_url("stopped"), tmp_path / "a.log", tmp_path / "b.log"

    def run(log: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return start_replicator("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "craft",
                                "--warehouse", url, "--until-caught-up", "--lease-seconds", "6", "--fresh-inserts",
                                "merge", *args, env=cli_env(**s3_store.env(), **(env or {})), log=log)

    holder = run(log_a, "--max-buffer-rows", "40", "--spill-rows", "0",
                 env={"REPLICATOR_FAULT": fault, "REPLICATOR_FAULT_ACTION": "stop"})
    try:
        def stopped() -> bool:
            stat = Path(f"/proc/{holder.pid}/stat").read_text() if holder.poll() is None else ""
            return holder.poll() is not None or stat.rsplit(")", 1)[-1].split()[:1] == ["T"]

        wait_for(f"the holder to stop itself ({fault})", stopped, timeout=300)
        assert holder.poll() is None, tail(log_a)
        taker = run(log_b, "--wait")
        assert taker.wait(timeout=600) == 0, tail(log_b)
        wh = Warehouse(url)
        state_after = wh.io.read(wh.state_path.path)
        steps_after = wh.windows()
        history_after = {e.uid: _history(spark, e.path) for e in wh.load_state().tables.values()}

        os.killpg(holder.pid, signal.SIGCONT)
        code = holder.wait(timeout=300)
        assert code == 3, (code, tail(log_a))
        assert "no longer holds" in tail(log_a), tail(log_a)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGCONT)
            kill_group(holder)
    assert wh.io.read(wh.state_path.path) == state_after, "the stopped holder wrote state.json after losing"
    assert wh.windows() == steps_after, "the stopped holder wrote the step log after losing"
    tables = wh.load_state().tables.values()
    assert {e.uid: _history(spark, e.path) for e in tables} == history_after, "it committed after losing"
    assert check_warehouse(spark, url, sim.expected) == []
    # The history agrees with the progress: each table's newest data commit is at or below the
    # watermark, and the step log's last record of each table names its current version.
    last_seen: dict[str, int] = {}
    for record in steps_after:
        for uid, entry in (record.get("tables") or {}).items():
            if isinstance(entry, dict) and "version" in entry:
                last_seen[uid] = int(entry["version"])
    for uid, versions in history_after.items():
        if uid in last_seen:
            assert last_seen[uid] <= versions[-1][0]
        applied = [ts for _v, ts in versions if ts is not None]
        assert applied == sorted(applied), f"{uid}: applied ts went backwards in the history"
        assert not applied or applied[-1] <= json.loads(state_after or b"{}")["applied_ts"]


def _history(spark: Any, path: str) -> list[tuple[int, int | None]]:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "userMetadata").collect()
    out = []
    for r in sorted(rows, key=lambda r: r.version):
        meta = json.loads(r.userMetadata) if r.userMetadata else {}
        out.append((int(r.version), (meta.get("replicator") or {}).get("applied_ts")))
    return out


def test_a_state_write_stalled_in_the_network_never_replaces_newer_progress(s3_store: S3Server) -> None:
    """Issue 50, item 7(b): a holder's `state.json` PUT is held in the network (a TCP proxy in front
    of the store) while the holder's term runs out; a new holder takes the warehouse and writes its
    progress; the held PUT is delivered at a random instant (before the taker reads, between its
    read and its first write, between its writes, or after them). Every trial: the newest progress
    is the taker's, never the stale write; a stale write delivered before the taker's first write
    is written over (a refusal the taker resolves by epochs), one delivered after is refused and
    its holder stops (LeaseLostError)."""
    import random
    import threading
    from urllib.parse import urlparse

    from replicator.storage import StorageOptions, configure
    from tests.stallproxy import StallProxy

    endpoint = urlparse(s3_store.endpoint)
    proxy = StallProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80)
    configure(StorageOptions(endpoint=proxy.url, region=s3_store.region))  # every request through it
    rnd = random.Random(50)
    outcomes: dict[str, int] = {}
    try:
        for trial in range(size(6, 30)):
            url = s3_store.warehouse_url(f"stalled-state-{trial}")
            a, a_ctx = _holder(url, 2.0)
            state = a.load_state()
            state.steps = 1
            a.save_state(state)
            _paused(a)
            proxy.hold(rb"PUT /[^ ]*/_replicator/state\.json")
            stale: dict[str, Any] = {}

            def late_write(a: Warehouse = a, stale: dict[str, Any] = stale) -> None:
                try:
                    a.save_state(State(steps=7))
                    stale["outcome"] = "landed"
                except LeaseLostError:
                    stale["outcome"] = "refused"

            writer = threading.Thread(target=late_write)
            writer.start()
            wait_for("the stale holder's state.json PUT to be held", proxy.held.is_set, 30)
            proxy.stop_holding()
            release_at = rnd.choice(["before the take", "after the read", "between writes", "after the writes"])
            if release_at == "before the take":
                proxy.release()
            b = Warehouse(url, lease_seconds=6)
            with b.locked(wait=True, timeout=30):
                state_b = b.load_state()
                if release_at == "after the read":
                    proxy.release()
                    writer.join(30)
                state_b.steps = 2
                b.save_state(state_b)
                if release_at == "between writes":
                    proxy.release()
                    writer.join(30)
                state_b.steps = 3
                b.save_state(state_b)
                if release_at == "after the writes":
                    proxy.release()
                writer.join(30)
                assert not writer.is_alive(), "the held write was answered"
                assert b.lease is not None
                final = json.loads(b.io.read(b.state_path.path) or b"{}")
                assert (final["steps"], final["epoch"]) == (3, b.lease.epoch), f"trial {trial} ({release_at})"
                if release_at in ("between writes", "after the writes"):
                    assert stale["outcome"] == "refused", f"trial {trial} ({release_at}): landed over the taker's"
            outcomes[f"{release_at}: {stale['outcome']}"] = outcomes.get(f"{release_at}: {stale['outcome']}", 0) + 1
            a.lease = None
            a_ctx.__exit__(None, None, None)
    finally:
        proxy.close()
        configure(StorageOptions(endpoint=s3_store.endpoint, region=s3_store.region))
    print(f"\nstalled state.json trials: {outcomes}")


def test_a_commit_put_stalled_past_the_lease_lands_whole_or_not_at_any_release_instant(
        spark: Any, s3_store: S3Server) -> None:
    """Issue 50, items 4 and 7(a): a holder's commit PUT is held in the network past the lease's
    time left. The PUT is bounded by that time (retries included), then undecided: the holder
    re-plans from the log rather than waiting out S3A's minute-long timeouts, and its fence stops
    it. The next holder writes the same step from the same progress while the held PUT is delivered
    at an instant chosen per trial: before the next holder reads the table (its rows are read, the
    write skipped), between its read and its write (its commit is refused and re-planned to a
    skip), at a random moment of its write, or after its commit (the late PUT is refused). Every
    trial: every row once, one commit of the step, whoever's it is. The stale holder and the next
    one share this JVM (the fence and the pins are the JVM's), as two drivers share the store."""
    import random
    import threading
    from urllib.parse import urlparse

    from replicator.changes import Change
    from replicator.delta.writer import TableWriter
    from replicator.tables import ColumnSpec, TableSpec
    from tests.stallproxy import StallProxy

    spec = TableSpec("db", "t", (ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("v", "STRING")), ("id",))

    def fresh(k: int, v: str) -> Change:
        return Change((k,), False, {"id": k, "v": v}, fresh=True)

    def meta(ts: int) -> dict[str, Any]:
        return {"replicator": {"step": ts, "applied_ts": ts, "kind": "window"}}

    endpoint = urlparse(s3_store.endpoint)
    proxy = StallProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80)
    bucket = s3_store.new_bucket("stall")
    spark.sparkContext._jsc.hadoopConfiguration().set(f"fs.s3a.bucket.{bucket}.endpoint", proxy.url)
    fence = spark.sparkContext._jvm.replicator.s3commit.Fence
    s3 = s3_store.client()
    instants = ["before the read", "between the read and the write", "during the write", "after the commit"]
    rnd = random.Random(50)
    outcomes: dict[str, int] = {}
    step = [fresh(2, "b"), fresh(3, "c")]
    try:
        for trial in range(size(4, 24)):
            release_at = instants[trial] if trial < len(instants) else rnd.choice(instants)
            path, uid = f"s3a://{bucket}/t{trial}", f"stalled-{trial}"
            stale = TableWriter(spark)  # the holder whose commit stalls (epoch 1)
            stale.epoch = lambda: 1
            stale.create_table(path, spec)
            stale.holds_nothing(path, uid)
            stale.merge(path, uid, spec, [fresh(1, "a")], 10, meta(10))
            version = stale.table_version(path)
            commit_key = f"t{trial}/_delta_log/{version + 1:020d}.json"
            replanned: list[bool] = []
            stale.fence = lambda replanned=replanned: replanned.append(True)  # type: ignore[method-assign]
            proxy.hold(rb"PUT /[^ ]*/_delta_log/\d{20}\.json")
            fence.holdFor(4_000_000_000)  # the lease has 4 s left
            try:
                with pytest.raises(Exception, match="deadline passed"):
                    stale.merge(path, uid, spec, step, 20, meta(20))
            finally:
                fence.disarm()
                proxy.stop_holding()
            assert proxy.held.is_set(), f"trial {trial}: the commit PUT was held"
            assert replanned, f"trial {trial}: the bounded PUT ended undecided and was re-planned"

            def deliver(trial: int = trial, commit_key: str = commit_key) -> None:
                proxy.release()
                assert proxy.delivered.wait(30), f"trial {trial}: the held PUT was delivered"
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # the store finishes the delivered PUT (or refuses it)
                    try:
                        s3.head_object(Bucket=bucket, Key=commit_key)
                        break
                    except Exception:
                        time.sleep(0.1)
                time.sleep(0.5)  # a refusal (412) has no trace to wait for

            holder = TableWriter(spark)  # the next holder (epoch 2): the same step from the same progress
            holder.epoch = lambda: 2
            timer = None
            if release_at == "before the read":
                deliver()
            elif release_at == "between the read and the write":
                assert holder.applied_ts(path, uid) == 10  # read (and pinned) before the late PUT lands
                deliver()
            elif release_at == "during the write":
                timer = threading.Timer(rnd.uniform(0.0, 1.5), proxy.release)
                timer.start()
            holder.merge(path, uid, spec, step, 20, meta(20))
            if timer is not None:
                timer.join()
            deliver()  # whatever is still held goes now
            lines = [json.loads(x) for x in s3.get_object(Bucket=bucket, Key=commit_key)["Body"].read().splitlines()]
            info = next(x["commitInfo"] for x in lines if "commitInfo" in x)
            whose = "the stale PUT landed" if json.loads(info["userMetadata"])["replicator"]["epoch"] == 1 \
                else "the stale PUT refused"
            outcomes[f"{release_at}: {whose}"] = outcomes.get(f"{release_at}: {whose}", 0) + 1
            rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
            assert rows == [(1, "a"), (2, "b"), (3, "c")], f"trial {trial} ({release_at}, {whose}): every row once"
            assert holder.applied_ts(path, uid) == 20
            assert holder.table_version(path) == version + 1, f"trial {trial}: one commit of the step"
    finally:
        fence.disarm()
        proxy.close()
    print(f"\nstalled commit PUT trials: {outcomes}")
