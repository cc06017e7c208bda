"""`replicator capture` under a broker outage: it reads Kafka as `run` does (KafkaSource), so a
broker that goes away mid-capture stops it after the retry budget with KafkaSourceError (exit 1)
instead of polling an absent broker forever; everything captured before is archived, and a
later capture resumes right after it (no gap, no duplicate)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from replicator.errors import DecodeError, KafkaSourceError, ReplicatorError
from replicator.formats.archive import read_archive
from replicator.sources.capture import Capture, CaptureOptions, capture
from tests.kafka_fixtures import new_topic
from tests.reliability.common import PrivateBroker, produce_small_batches
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(1800)]


def _archived(out: Path) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of every complete archived record ([] while the archive is being written)."""
    try:
        return [(r.partition, r.offset, r.value) for r in read_archive(out)]
    except (DecodeError, ReplicatorError, FileNotFoundError):
        return []


def _records(n: int, tag: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(p, None, b"%s-%d-%d" % (tag, p, i)) for p in range(2) for i in range(n)]


def test_capture_stops_after_the_retry_budget_when_the_broker_goes_away(tmp_path: Path) -> None:
    broker = PrivateBroker(tmp_path / "broker")
    try:
        topic = new_topic(broker.bootstrap, 2, prefix="rel-capture")
        produce_small_batches(broker.bootstrap, topic, _records(40, b"a"))
        out = tmp_path / "archive"
        following = Capture(CaptureOptions(broker.bootstrap, topic, out, protocol="open", retry_budget_s=4.0,
                                           flush_interval_s=0.2))
        errors: list[BaseException] = []

        def run() -> None:
            try:
                following.run()
            except BaseException as exc:  # handed to the test thread
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        wait_for("the records to be archived", lambda: len(_archived(out)) == 80 or not thread.is_alive(),
                 timeout=300)
        assert thread.is_alive(), f"the capture ended before the outage: {errors}"
        broker.stop()
        thread.join(timeout=180)  # the budget, plus a probe and its bounded request
        if thread.is_alive():
            following.stop.set()
            pytest.fail("the capture went on polling an absent broker past its retry budget")
        assert len(errors) == 1 and isinstance(errors[0], KafkaSourceError), errors
        text = str(errors[0])
        assert "unreachable for" in text and "retry budget 4s" in text, text
        assert "everything captured so far is archived" in text, text
        assert errors[0].exit_code == 1

        broker.start()
        produce_small_batches(broker.bootstrap, topic, _records(10, b"b"))
        summary = capture(CaptureOptions(broker.bootstrap, topic, out, until_caught_up=True))
        assert summary.records == 20 and summary.stopped == "caught up"
        archived = _archived(out)
        for p in range(2):
            offsets = [o for q, o, _ in archived if q == p]
            assert offsets == list(range(50)), f"partition {p}: a gap or a duplicate across the outage"
        assert sorted(v for _, _, v in archived if v) == sorted(v for _, _, v in _records(40, b"a") + _records(10, b"b")
                                                              if v)
    finally:
        broker.close()
