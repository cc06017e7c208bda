"""Fencing tokens (storage/lease.py, storage/fenced.py): each take of the lease gets a higher
epoch than the record it replaced, every file a holder writes carries it, and a refused write
compares epochs instead of asking the store (or a clock) who holds the lease now: an older
epoch's file is a stale holder's late write and is written over; the same or a newer epoch's
stops the writer, so older progress can never replace a newer holder's."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest

from replicator.delta.session import DeltaSession
from replicator.errors import LeaseLostError
from replicator.storage.fenced import FencedWriter, file_epoch
from replicator.storage.lease import Holder, Lease, boot_id, pid_namespace, process_start
from replicator.storage.local import LocalFileIO
from replicator.warehouse import State, Warehouse
from replicator.warehouse.binlog_state import STATE_FILE, load_state, state_bytes


class _Held:
    """A lease this process holds at `epoch` whose own check passes (a holder paused after it)."""

    what = "warehouse W"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def check(self) -> None:
        pass


def _writer(epoch: int) -> FencedWriter:
    return FencedWriter(LocalFileIO(), _Held(epoch))  # type: ignore[arg-type]


def test_each_take_of_the_lease_has_a_higher_epoch(tmp_path: Path) -> None:
    io, path = LocalFileIO(), str(tmp_path / "lease.json")
    epochs = []
    for _ in range(3):
        lease = Lease(io, path, seconds=30)
        lease.acquire()
        epochs.append(lease.epoch)
        lease.renew()
        assert lease.epoch == epochs[-1], "a renewal keeps the epoch"
        lease.release()
    assert epochs == [1, 2, 3]
    # a holder gone from this machine, of a later epoch: the taker's is higher still
    now = time.time()
    dead = Holder("h", socket.gethostname(), 2**22 + 7, boot_id(), now, now + 600, pidns=pid_namespace(),
                  start=process_start(os.getpid()), epoch=41)  # no such pid here
    io.write(path, dead.to_json())
    lease = Lease(io, path, seconds=30)
    lease.acquire()
    assert lease.epoch == 42 and json.loads(io.read(path) or b"")["epoch"] == 42
    lease.release()
    assert json.loads(io.read(path) or b"")["epoch"] == 42, "given back, the record keeps its epoch"


def test_older_progress_never_replaces_a_newer_holders(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    stale, new = _writer(1), _writer(2)
    stale.write(path, json.dumps({"steps": 1, "epoch": 1}).encode())
    new.write(path, json.dumps({"steps": 2, "epoch": 2}).encode())
    with pytest.raises(LeaseLostError, match="written under lease epoch 2, this run's is 1"):
        stale.write(path, json.dumps({"steps": 9, "epoch": 1}).encode())
    assert json.loads(Path(path).read_bytes())["steps"] == 2
    new.write(path, json.dumps({"steps": 3, "epoch": 2}).encode())  # the holder goes on
    assert json.loads(Path(path).read_bytes())["steps"] == 3


def test_a_stale_holders_late_write_is_written_over(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    new = _writer(5)
    new.seen(path, None)  # it read the warehouse before anything was there
    _writer(4).write(path, json.dumps({"steps": 7, "epoch": 4}).encode())  # lands first
    new.write(path, json.dumps({"steps": 2, "epoch": 5}).encode())
    assert json.loads(Path(path).read_bytes())["steps"] == 2 and new.refusals == 1
    # a file of a release without epochs counts as epoch 0
    Path(path).write_text(json.dumps({"steps": 1}))
    new.write(path, json.dumps({"steps": 3, "epoch": 5}).encode())
    assert json.loads(Path(path).read_bytes())["steps"] == 3


def test_the_epoch_of_a_file() -> None:
    assert file_epoch(b'{"epoch": 3, "steps": 1}') == 3
    assert file_epoch(b'{"steps": 1}') == 0
    assert file_epoch(b'{"step": 1, "epoch": 2}\n{"step": 2, "epoch": 4}\n{"step": 3, "ep') == 4
    assert file_epoch(b"") == 0


def test_everything_a_holder_writes_carries_its_epoch(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    with wh.locked():
        assert wh.epoch() == 1
        state = wh.load_state()
        state.steps = 1
        wh.save_state(state)
        wh.log_step({"step": 1, "hi": 10, "tables": {}})
    assert json.loads(wh.state_path.read_bytes())["epoch"] == 1
    assert wh.windows()[0]["epoch"] == 1
    assert wh.epoch() == 0, "outside a locked run nothing is stamped"
    assert "epoch" not in json.loads(State().model_dump_json()), "absent where no holder wrote it"
    assert os.path.exists(wh.lease_path.path)


def test_binlog_progress_is_written_by_token(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    where = wh.meta / STATE_FILE
    with wh.locked():
        state = load_state(where, wh.read_own(where))
        state.transactions, state.epoch = 1, wh.epoch()
        wh.write_own(where, state_bytes(state))
        assert json.loads(where.read_bytes())["epoch"] == 1
        # a newer holder (this one's lease lost unseen, a pause) wrote its progress since
        newer = {**json.loads(where.read_bytes()), "epoch": 2, "transactions": 5}
        where.io.write(where.path, json.dumps(newer).encode())
        state.transactions = 2
        with pytest.raises(LeaseLostError, match="written under lease epoch 2, this run's is 1"):
            wh.write_own(where, state_bytes(state))
    assert load_state(where).transactions == 5, "older progress never replaces a newer holder's"
    with wh.locked():  # the next holder goes over a stale holder's late write
        state = load_state(where, wh.read_own(where))
        stale = {**json.loads(where.read_bytes()), "epoch": 1, "transactions": 9}
        where.io.write(where.path, json.dumps(stale).encode())
        state.epoch = wh.epoch()
        wh.write_own(where, state_bytes(state))
    assert (load_state(where).transactions, load_state(where).epoch) == (5, 2)


def _commit(meta: dict[str, Any] | None) -> bytes:
    info = {"operation": "WRITE", **({"userMetadata": json.dumps(meta)} if meta is not None else {})}
    return (json.dumps({"commitInfo": info}) + "\n" + json.dumps({"add": {"path": "x.parquet"}}) + "\n").encode()


def test_a_table_written_under_a_later_epoch_stops_the_run() -> None:
    log = {0: _commit(None),
           1: _commit({"replicator": {"kind": "window", "applied_ts": 10, "epoch": 2}}),
           2: _commit({"replicator": {"kind": "maintain", "epoch": 3}})}
    edge = DeltaSession(cast(Any, None))
    edge.table_version = lambda path: max(log)  # type: ignore[method-assign]

    def read(path: str) -> bytes | None:
        return log.get(int(path.rsplit("/", 1)[-1].split(".")[0]))

    edge.epoch = lambda: 3
    assert edge.last_applied_ts("/t", read) == 10, "its own and older epochs' commits: read past"
    edge.epoch = lambda: 2
    with pytest.raises(LeaseLostError, match="version 2 was committed under lease epoch 3, this run's is 2"):
        edge.last_applied_ts("/t", read)
    edge.epoch = lambda: 0  # outside a locked run (tools, readers): no fencing
    assert edge.last_applied_ts("/t", read) == 10


def test_a_write_that_landed_on_a_timed_out_attempt_is_this_holders_own(tmp_path: Path) -> None:
    """A PUT that timed out may have landed; the client's retry is then refused (412: the tag
    moved). The file holds this very write, byte for byte: done, not a newer holder (before, the
    same epoch there stopped the run with exit 3)."""

    class LandsThenRefuses(LocalFileIO):
        def replace(self, path: str, data: bytes, etag: str) -> str | None:
            super().replace(path, data, etag)  # the first attempt lands, its answer is lost
            return None  # the retry is refused

    path = str(tmp_path / "state.json")
    holder = FencedWriter(LandsThenRefuses(), _Held(3))  # type: ignore[arg-type]
    holder.write(path, json.dumps({"steps": 1, "epoch": 3}).encode())
    holder.write(path, json.dumps({"steps": 2, "epoch": 3}).encode())
    assert json.loads(Path(path).read_bytes())["steps"] == 2 and holder.refusals == 1
    holder.io = LocalFileIO()
    holder.write(path, json.dumps({"steps": 3, "epoch": 3}).encode())  # its tag is the landed write's
    assert json.loads(Path(path).read_bytes())["steps"] == 3 and holder.refusals == 1
    other = _writer(3)  # anything else under the same epoch still stops the writer
    other.seen(path, None)
    with pytest.raises(LeaseLostError, match="written under lease epoch 3, this run's is 3"):
        other.write(path, json.dumps({"steps": 9, "epoch": 3}).encode())
