"""Capture archives in an object store (a real S3-compatible server), which cannot append:

- `capture --out s3a://...` puts the same records a local capture writes, as one object per
  archive file; `run --archive` from the prefix (or from one object, following its Chain) gives the
  true tables, and `archive inspect` reads the objects;
- every object is a complete, readable archive file at every moment of a session; a session
  stopped before an upload leaves nothing unreadable and the next one takes its empty object over;
  a second writer into the same prefix is refused;
- a second capture resumes after the objects already there (new objects, no duplicate), and the
  consumer group's offsets are committed only for what was put.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replicator.cli import main
from replicator.errors import StorageError
from replicator.formats.archive import list_archive_files, read_archive
from replicator.formats.archive_store import StagedArchiveWriter
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation, produce
from replicator.sources.capture import CaptureOptions, capture
from tests.integration.helpers import produce as produce_raw
from tests.integration.test_capture_archive import _committed
from tests.kafka_fixtures import new_topic
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


@pytest.fixture()
def s3(s3_store: S3Server) -> S3Server:
    """The session's server as this process's object store (tests/conftest.py)."""
    return s3_store


def _records(where: str | Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.partition, r.offset, r.key, r.value) for r in read_archive(where)]


def _names(url: str) -> list[str]:
    return [f.name for f in list_archive_files(url)]


def test_capture_into_s3_then_run_from_it(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    topic = new_topic(kafka_bootstrap, 2, prefix="cap-s3")
    sim = Simulation(SimConfig(protocol="open", events=300, seed=43, partitions=2, tables=2, ddl="none"))
    produce(sim, kafka_bootstrap, topic)
    total = sum(sim.stats.messages.values())

    url = s3.warehouse_url("capture")
    assert main(["capture", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--out", url,
                 "--until-caught-up", "--rotate-bytes", "60000"]) == 0
    text = capsys.readouterr().out
    assert f"captured {total} records of topic {topic!r} (open) into {url}" in text
    names = _names(url)
    assert len(names) > 1 and all(n in text for n in names)
    assert _committed(kafka_bootstrap, f"replicator-capture-{topic}", topic, 2) == sim.stats.messages

    # The same records as a local capture of the topic, in the same files.
    local = tmp_path / "local"
    capture(CaptureOptions(kafka_bootstrap, topic, local, until_caught_up=True, rotate_bytes=60000))
    assert [f.name for f in list_archive_files(local)] == names
    assert _records(url) == _records(local)
    assert _records(f"{url}/{names[0]}") == _records(local)  # one object: its Chain leads to the others

    assert main(["archive", "inspect", f"{url}/"]) == 0
    shown = capsys.readouterr().out
    assert f"# {url}/{names[0]}" in shown and shown.count(" Record ") == total and "crc=BAD" not in shown

    wh = tmp_path / "wh"
    assert main(["run", "--archive", url, "--warehouse", str(wh), "--json-summary"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["source"] == topic and summary["records"] == total
    assert check_warehouse(spark, wh, sim.expected) == []


def test_capture_into_s3_resumes_after_the_objects_there(s3: S3Server, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2, prefix="cap-s3-resume")
    produce_raw(kafka_bootstrap, topic, [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(40)])
    url = s3.warehouse_url("resume")
    group = f"cap-{topic}"
    opts = CaptureOptions(kafka_bootstrap, topic, url, until_caught_up=True, group_id=group, protocol="craft",
                          rotate_bytes=300)
    first = capture(opts)
    assert first.records == 40 and len(first.files) > 1
    assert _committed(kafka_bootstrap, group, topic, 2) == {0: 20, 1: 20}
    before = _names(url)

    produce_raw(kafka_bootstrap, topic, [(i % 2, b"k", b"w%d" % i) for i in range(10)])
    second = capture(opts)
    assert second.records == 10
    for p in (0, 1):
        assert second.partitions[p].origin == "after the last archived record"
    after = _names(url)
    assert after[:len(before)] == before and len(after) > len(before)  # new objects only
    records = _records(url)
    for p in (0, 1):
        assert [o for q, o, _, _ in records if q == p] == list(range(25))
    assert _committed(kafka_bootstrap, group, topic, 2) == {0: 25, 1: 25}

    # Nothing new: no object is put.
    third = capture(opts)
    assert third.records == 0 and third.files == [] and _names(url) == after


def test_every_object_is_readable_at_every_moment(s3: S3Server) -> None:
    url = s3.warehouse_url("staged")

    def write(w: StagedArchiveWriter, partition: int, offset: int) -> None:
        w.write_record(topic="t", partition=partition, offset=offset, timestamp_ms=1, key=None,
                       value=b"x" * 50, protocol="craft")

    w = StagedArchiveWriter(url, rotate_bytes=250)
    for i in range(12):
        write(w, i % 2, i // 2)
        stored = _records(url)  # never a Chain naming a missing object, never a gap
        assert {p: o + 1 for p, o, _, _ in stored} == w.durable
    w.close()
    assert len(_records(url)) == 12

    # A session that dies before its first upload: its file's object holds only the ArchiveStart.
    dead = StagedArchiveWriter(url, rotate_bytes=250)
    write(dead, 0, 6)
    shutil.rmtree(dead.staging)  # killed: the staged record is gone (it was never acknowledged)
    names = _names(url)
    assert len(_records(url)) == 12

    again = StagedArchiveWriter(url, rotate_bytes=250)
    assert again.reused == names[-1] and again.sequence == dead.sequence
    write(again, 0, 6)
    # Two writers at one prefix: the object is replaced only if unchanged since it was read, so the
    # one completing second is refused (its records were never acknowledged) instead of overwriting.
    other = StagedArchiveWriter(url, rotate_bytes=250)
    write(other, 0, 6)
    other.close()
    with pytest.raises(StorageError, match="another capture"):
        again.close()
    assert _names(url) == names and len(_records(url)) == 13
