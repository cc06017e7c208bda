"""The storage layer on a local directory: conditional writes, the writer lease (taking, refusing,
taking over, fencing) and the step log in both of its shapes (one appended file; segments, as on an
object store). Object stores get the same checks against a real server in
tests/integration/test_s3_warehouse.py and tests/reliability/test_object_store.py."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from pathlib import Path
from unittest import mock

import pytest

from replicator.errors import LeaseLostError, StateError
from replicator.storage import Location, as_location, fileio_for, is_url, normalise_root
from replicator.storage.fileio import Versioned
from replicator.storage.lease import Holder, Lease, boot_id, pid_namespace, process_start
from replicator.storage.local import LocalFileIO
from replicator.storage.local import _etag as _local_etag
from replicator.storage.steplog import SEGMENT_RECORDS, StepLog
from replicator.warehouse import Warehouse
from tests.support.waiting import poll_until


class SegmentedIO(LocalFileIO):
    """A local directory that cannot append: the step log takes its object-store shape."""

    can_append = False


def test_urls_and_roots(tmp_path: Path) -> None:
    assert is_url("s3a://b/p") and is_url("abfss://c@a/p") and not is_url("/x") and not is_url("file:///x")
    assert normalise_root("s3a://bucket/prefix/") == "s3a://bucket/prefix"
    assert normalise_root(f"file://{tmp_path}") == str(tmp_path.resolve())
    assert normalise_root(tmp_path / ".." / tmp_path.name) == str(tmp_path.resolve())
    assert isinstance(fileio_for(tmp_path), LocalFileIO)
    loc = as_location(tmp_path) / "a" / "b.json"
    assert isinstance(loc, Location) and os.fspath(loc) == str(tmp_path / "a" / "b.json") and loc.name == "b.json"
    assert not loc.exists()
    loc.parent.mkdir(parents=True)
    loc.io.write(loc.path, b"{}")
    assert loc.exists() and loc.read_bytes() == b"{}" and loc.parent.exists()


def test_conditional_writes(tmp_path: Path) -> None:
    io, path = LocalFileIO(), str(tmp_path / "meta" / "lease.json")
    first = io.create(path, b"one")
    assert first is not None and io.create(path, b"two") is None
    assert io.replace(path, b"three", "not-the-tag") is None and io.read(path) == b"one"
    second = io.replace(path, b"three", first)
    assert second is not None and second != first and io.read(path) == b"three"
    assert io.replace(path, b"four", first) is None, "a stale tag must not replace"
    got = io.read_versioned(path)
    assert got is not None and got.etag == second
    assert sorted(n for n in io.children(str(tmp_path / "meta")) if not n.endswith(".guard")) == ["lease.json"]


def test_lease_refuses_a_live_holder_and_names_it(tmp_path: Path) -> None:
    io, path = LocalFileIO(), str(tmp_path / "lease.json")
    mine = Lease(io, path, seconds=30, what="warehouse W")
    mine.acquire()
    try:
        other = Lease(io, path, seconds=30, what="warehouse W")
        with pytest.raises(StateError, match=rf"warehouse W is in use by another replicator run \(host "
                                             rf"{socket.gethostname()}, pid {os.getpid()}, since "):
            other.acquire()
        with pytest.raises(StateError, match="in use"):
            other.acquire(wait=True, timeout=0.5)
        mine.check()
    finally:
        mine.release()
    again = Lease(io, path, seconds=30)
    again.acquire()  # given back: taken at once
    again.release()


def test_a_dead_holder_here_is_taken_over_at_once_one_elsewhere_after_its_term(tmp_path: Path) -> None:
    io, path = LocalFileIO(), str(tmp_path / "lease.json")
    now = time.time()
    here = {"pidns": pid_namespace(), "start": process_start(os.getpid())}
    dead = Holder("h1", socket.gethostname(), 2**22 + 12345, boot_id(), now, now + 600, **here)  # no such pid
    io.write(path, dead.to_json())
    lease = Lease(io, path, seconds=30)
    lease.acquire()
    lease.release()

    # A pid that exists but belongs to a process started at another time: reused, the holder is gone.
    reused = Holder("h1", socket.gethostname(), os.getpid(), boot_id(), now, now + 600, pidns=here["pidns"],
                    start=here["start"] + 1)
    io.write(path, reused.to_json())
    lease = Lease(io, path, seconds=30)
    lease.acquire()
    lease.release()

    # Same host and boot, but another pid namespace (a container with host networking) or no
    # record of it (an older replicator): its pid says nothing here, so its term must run out.
    for other in ({"pidns": "pid:[1]", "start": 1}, {}):
        live_elsewhere = Holder("h3", socket.gethostname(), 2**22 + 12345, boot_id(), now, now + 600, **other)
        io.write(path, live_elsewhere.to_json())
        with pytest.raises(StateError, match="in use by another replicator run"):
            Lease(io, path, seconds=30).acquire()

    elsewhere = Holder("h2", "another-host", os.getpid(), "other-boot", now, time.time() + 1.0)
    io.write(path, elsewhere.to_json())
    waiting = Lease(io, path, seconds=6)  # grace 1 s
    with pytest.raises(StateError, match="host another-host"):
        waiting.acquire()
    waiting.acquire(wait=True, timeout=20)
    assert time.time() >= elsewhere.expires_at + waiting.grace
    waiting.release()


def test_fencing_a_holder_whose_lease_was_taken_or_ran_out(tmp_path: Path) -> None:
    io, path = LocalFileIO(), str(tmp_path / "lease.json")
    lease = Lease(io, path, seconds=6)
    lease.acquire()
    try:
        current = io.read_versioned(path)
        assert current is not None
        taker = Holder("taker", "another-host", 1, "", time.time(), time.time() + 60)
        assert io.replace(path, taker.to_json(), current.etag) is not None
        lease.renew()  # the renewal finds the lease changed under it
        with pytest.raises(LeaseLostError, match="another replicator run took it over"):
            lease.check()
    finally:
        lease.release()
    holder = Holder.from_json(io.read(path) or b"")
    assert holder is not None and holder.holder == "taker", "a lost lease is not given back over the taker"

    paused = Lease(io, str(tmp_path / "other.json"), seconds=6)
    paused.acquire()
    paused._stop.set()  # no renewals: as if the process were paused
    paused._deadline = time.monotonic()  # its monotonic deadline (term less the margin) has come
    with pytest.raises(LeaseLostError, match="without a renewal"):
        paused.check()
    paused.release()


def test_a_renewal_that_landed_unanswered_keeps_the_lease(tmp_path: Path) -> None:
    """A renewal PUT whose answer was lost may have landed; the client's retry is then refused
    (the tag moved). The record there is still this holder's, same take: the lease is kept, not
    lost to "another run" (before: exit 3 for nothing). A record of anyone else still loses it."""

    class LandsThenRefuses(LocalFileIO):
        lands = False

        def replace(self, path: str, data: bytes, etag: str) -> str | None:
            if not self.lands:
                return super().replace(path, data, etag)
            super().replace(path, data, etag)  # the first attempt lands, its answer is lost
            return None  # the retry is refused

    io, path = LandsThenRefuses(), str(tmp_path / "lease.json")
    lease = Lease(io, path, seconds=6)
    lease.acquire()
    try:
        io.lands = True
        lease.renew()
        io.lands = False
        lease.check()
        assert lease.renewals >= 1
        lease.renew()  # the next renewal is conditional on the landed record's tag
        lease.check()
        current = io.read_versioned(path)
        assert current is not None
        io.write(path, Holder("taker", "another-host", 1, "", time.time(), time.time() + 60).to_json())
        io.lands = True
        lease.renew()
        with pytest.raises(LeaseLostError, match="another replicator run took it over"):
            lease.check()
    finally:
        lease.release()


def test_warehouse_fence_is_a_no_op_for_readers(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.fence()
    with wh.locked():
        wh.fence()
        assert (tmp_path / "wh" / "_replicator" / "lease.json").exists()
    wh.fence()


@pytest.mark.parametrize("io", [LocalFileIO(), SegmentedIO()], ids=["appended", "segments"])
def test_step_log_shapes(tmp_path: Path, io: LocalFileIO) -> None:
    log = StepLog(io, str(tmp_path))
    n = SEGMENT_RECORDS * 2 + 5
    for step in range(1, n + 1):
        log.append({"step": step, "hi": step * 10})
    log.append({"step": n, "hi": -1})  # a step re-applied after a crash: its last record wins
    fresh = StepLog(io, str(tmp_path))  # another process reads it back
    records = fresh.records()
    assert [r["step"] for r in records] == list(range(1, n + 1)) and records[-1]["hi"] == -1
    if io.can_append:
        assert (tmp_path / "windows.jsonl").exists() and not (tmp_path / "windows").exists()
    else:
        segments = sorted(p.name for p in (tmp_path / "windows").iterdir())
        assert segments == [f"{0:012d}.jsonl", f"{SEGMENT_RECORDS + 1:012d}.jsonl",
                            f"{2 * SEGMENT_RECORDS + 1:012d}.jsonl"]
        fresh.append({"step": n + 1, "hi": 0})  # a new writer continues the last segment
        assert len(sorted((tmp_path / "windows").iterdir())) == 3
        assert [r["step"] for r in StepLog(io, str(tmp_path)).records()][-2:] == [n, n + 1]


def test_a_holder_past_its_monotonic_deadline_loses_the_lease_and_says_so(tmp_path: Path) -> None:
    """The renewal thread wakes at the deadline: a holder whose renewals stop (here: the store
    refuses them) is lost by then and its listeners hear it, before any taker may start."""
    io, path = LocalFileIO(), str(tmp_path / "lease.json")
    lease = Lease(io, path, seconds=3)  # margin 0.5 s: deadline 2.5 s after taking; first renewal at 1 s
    heard: list[float | None] = []
    lease.acquire()
    lease.on_change(heard.append)
    assert heard and heard[0] is not None
    original = io.replace
    io.replace = lambda *a, **k: (_ for _ in ()).throw(OSError("store unreachable"))  # type: ignore[method-assign]
    try:
        start = time.monotonic()
        poll_until(lambda: heard[-1] is None, 10, every=0.05)
        assert heard[-1] is None, "the listener hears the loss at the deadline"
        assert time.monotonic() - start < 3.0
        with pytest.raises(LeaseLostError, match="not renewed by its deadline"):
            lease.check()
    finally:
        io.replace = original  # type: ignore[method-assign]
        lease.release()


class _IgnoresConditions(LocalFileIO):
    """A store that accepts every conditional write (as S3Proxy 3.x emulated them, racily)."""

    def create(self, path: str, data: bytes) -> str | None:
        self.write(path, data)
        return "etag"


def test_a_store_that_ignores_conditional_writes_is_refused_in_one_line(tmp_path: Path) -> None:
    from replicator.errors import ConfigError
    from replicator.storage import StorageOptions, configure, storage_options
    from replicator.storage.fenced import _honoured, require_conditional_writes

    require_conditional_writes(LocalFileIO(), str(tmp_path / "honours"))  # a guarded create-if-absent: fine
    assert not list((tmp_path / "honours").iterdir()), "the probe object is removed again"
    saved = storage_options()
    try:
        with pytest.raises(ConfigError) as err:
            require_conditional_writes(_IgnoresConditions(), str(tmp_path / "ignores"))
        message = str(err.value)
        assert "\n" not in message and "If-None-Match" in message
        assert "--s3-conditional-writes false" in message and "REPLICATOR_S3_CONDITIONAL_WRITES=false" in message
        configure(StorageOptions(conditional_writes=False))  # one writer ensured otherwise: allowed
        _honoured.clear()
        require_conditional_writes(_IgnoresConditions(), str(tmp_path / "ignores"))
    finally:
        configure(saved)
        _honoured.clear()


class _IgnoresIfMatch(LocalFileIO):
    """A store that refuses a second create but replaces whatever the ETag it is given."""

    def replace(self, path: str, data: bytes, etag: str) -> str | None:
        current = self.read(path)
        return None if current is None else super().replace(path, data, _local_etag(current))


def test_a_store_that_ignores_if_match_is_refused_in_one_line(tmp_path: Path) -> None:
    """The lease and state.json rely on a stale If-Match being refused (412), not only If-None-Match."""
    from replicator.errors import ConfigError
    from replicator.storage.fenced import _honoured, honours_conditional_writes, require_conditional_writes

    try:
        assert honours_conditional_writes(LocalFileIO(), str(tmp_path / "honours"))
        with pytest.raises(ConfigError) as err:
            require_conditional_writes(_IgnoresIfMatch(), str(tmp_path / "ignores"))
        message = str(err.value)
        assert "\n" not in message and "If-Match: <an outdated ETag> succeeded" in message
        assert "--s3-conditional-writes false" in message
        assert not list((tmp_path / "ignores").iterdir()), "the probe object is removed again"
    finally:
        _honoured.clear()


def test_a_session_without_the_commit_store_is_refused_for_an_s3a_warehouse(tmp_path: Path) -> None:
    from replicator.errors import ConfigError
    from replicator.runtime import commitfence
    from replicator.storage import StorageOptions, configure, storage_options

    class Conf:
        def get(self, key: str, default: str | None = None) -> str | None:
            return default

    class Session:
        conf = Conf()

    lease = Lease(LocalFileIO(), str(tmp_path / "lease.json"), seconds=30)
    saved = storage_options()
    try:
        with pytest.raises(ConfigError, match=r"no replicator commit store for s3a://.*--s3-conditional-writes false"):
            commitfence.arm(Session(), lease, "s3a://bucket/wh")  # type: ignore[arg-type]
        configure(StorageOptions(conditional_writes=False))
        commitfence.arm(Session(), lease, "s3a://bucket/wh")  # type: ignore[arg-type]
    finally:
        configure(saved)


class _DatedIO(LocalFileIO):
    """A local directory whose reads say how old the file is by a store's own clock, as S3 does."""

    def __init__(self) -> None:
        super().__init__()
        self.age = 0.0

    def read_versioned(self, path: str) -> Versioned | None:
        got = super().read_versioned(path)
        return None if got is None else dataclasses.replace(got, age=self.age)


def test_takeover_reads_the_lease_s_age_off_the_store_s_clock_not_the_taker_s(tmp_path: Path) -> None:
    io, path = _DatedIO(), str(tmp_path / "lease.json")
    holder = Lease(io, path, seconds=30)
    holder.acquire()
    holder._stop.set()  # paused: no renewals from now on
    record = Holder.from_json(io.read(path) or b"")
    assert record is not None and record.term == 30 and json.loads(io.read(path) or b"")["term_s"] == 30
    # A taker whose wall clock runs an hour ahead: the record is 10 s old by the store's clock, live.
    io.age = 10.0
    with mock.patch("replicator.storage.lease.time.time", return_value=time.time() + 3600), \
            pytest.raises(StateError, match="in use by another replicator run"):
        Lease(io, path, seconds=30).acquire()
    # A taker whose wall clock runs an hour behind: 40 s old by the store's clock, past term and grace.
    io.age = 40.0
    with mock.patch("replicator.storage.lease.time.time", return_value=time.time() - 3600):
        taker = Lease(io, path, seconds=30)
        taker.acquire()
    assert taker.epoch == holder.epoch + 1
    taker._stop.set()  # private: no renewals from here on (the record below is written by hand)
    # an older record (no term) is judged by the taker's wall clock against its expiry, as before
    old = {**json.loads(io.read(path) or b""), "expires_at": time.time() + 30, "host": "elsewhere"}
    del old["term_s"]
    io.write(path, json.dumps(old).encode())
    io.age = 3600.0
    with pytest.raises(StateError, match="in use by another replicator run"):
        Lease(io, path, seconds=30).acquire()
