"""TiCDC large messages through a real broker into real Delta (issue 30 part 4):
- a simulated stream whose values are all snappy-compressed and whose large rows are claim-check
  references (files in a local directory) replicates to exactly the simulator's expected tables, in
  the Open Protocol, canal-json and Simple;
- a missing claim-check file stops the run (also with --on-error skip) with the position and URL,
  nothing dead-lettered;
- a handle-key-only row is dead-lettered with the reason and the remedy (claim-check), Open and Simple.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for
from replicator.codec.large import claim_check_envelope
from replicator.codec.limits import DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.open_protocol import decode, encode_rows
from replicator.codec.values import DecodeOptions
from replicator.delta.deadletter import read_dead_letters
from replicator.errors import ClaimCheckError
from replicator.events import Column, Flag, Op, Position, RowChange, TypeCode
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation, produce
from replicator.sources.claimcheck import ClaimChecks
from replicator.warehouse import Warehouse
from tests.integration.helpers import open_frame, run_engine
from tests.integration.helpers import produce as produce_raw
from tests.kafka_fixtures import new_topic
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration

SIM = SimConfig(protocol="open", seed=30, events=80, partitions=2, tables=2, ddl="none", compression="snappy",
                max_message_bytes=700)


@pytest.mark.parametrize("protocol", ["open", "canal-json", "simple"])
def test_compressed_claim_checked_stream_replicates_exactly(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                                            protocol: str) -> None:
    cc = tmp_path / "claim-check"
    sim = Simulation(dataclasses.replace(SIM, protocol=protocol, claim_check_dir=str(cc)))
    topic = new_topic(kafka_bootstrap, 2, prefix=f"large-{protocol}")
    produce(sim, kafka_bootstrap, topic)
    assert sim.claim_check_files > 3
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol,
                         decode=DecodeOptions(compression="snappy"), claim_check_storage=str(cc))
    assert summary.dead_letters == 0 and summary.error is None
    assert check_warehouse(spark, wh, sim.expected) == []


def test_simple_handle_key_only_row_is_dead_lettered_with_the_remedy(kafka_bootstrap: str, spark: Any,
                                                                    tmp_path: Path) -> None:
    """Simple `handleKeyOnly` (values lz4-compressed, after their BOOTSTRAP): never applied. The engine's
    path is the protocol's mark only; canal-json's `_tidb.onlyHandleKey` is checked in the unit tests."""
    protocol = "simple"
    row = RowChange(415508878783938562, "test", "t1", Op.INSERT, columns=(
        Column("id", int(TypeCode.LONG), int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY), 1),))
    codec = codec_for(protocol)
    messages = codec.encode_rows([dataclasses.replace(row, only_handle_key=True)], compression="lz4")
    topic = new_topic(kafka_bootstrap, 1, prefix=f"large-ohk-{protocol}")
    produce_raw(kafka_bootstrap, topic, [(0, key, value) for key, value in messages])
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, on_error="skip",
                         decode=DecodeOptions(compression="lz4"))
    assert summary.dead_letters == 1
    (dead,) = read_dead_letters(spark, Warehouse(wh))
    reason = str(dead["error"])
    assert "handle-key-only" in reason and "snapshot read" in reason and "claim-check" in reason, reason


def test_missing_claim_check_file_stops_and_handle_key_only_is_dead_lettered(kafka_bootstrap: str, spark: Any,
                                                                           tmp_path: Path) -> None:
    cc = tmp_path / "claim-check"
    sim = Simulation(dataclasses.replace(SIM, events=40, partitions=1, claim_check_dir=str(cc)))
    topic = new_topic(kafka_bootstrap, 1, prefix="large-missing")
    produce(sim, kafka_bootstrap, topic)
    gone = sorted(cc.iterdir())[0]
    gone.unlink()
    wh = tmp_path / "wh"
    with pytest.raises(ClaimCheckError) as err:
        run_engine(kafka_bootstrap, topic, wh, spark, decode=DecodeOptions(compression="snappy"),
                   claim_check_storage=str(cc), on_error="skip")
    text = str(err.value)
    assert f"topic {topic!r} partition 0 offset " in text and str(gone) in text, text
    assert read_dead_letters(spark, Warehouse(wh)) == []  # stopped, not skipped

    topic = new_topic(kafka_bootstrap, 1, prefix="large-ohk")
    ohk = b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1,"ohk":true}'
    produce_raw(kafka_bootstrap, topic, [(0, *open_frame([ohk], [b'{"u":{"id":{"t":3,"h":true,"f":11,"v":1}}}']))])
    wh = tmp_path / "wh-ohk"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, on_error="skip")
    assert summary.dead_letters == 1
    (dead,) = read_dead_letters(spark, Warehouse(wh))
    reason = str(dead["error"])
    assert "handle-key-only" in reason and "snapshot read" in reason and "claim-check" in reason, reason


def test_spark_reader_decompresses_and_stops_at_a_reference(kafka_bootstrap: str, spark: Any,
                                                            tmp_path: Path) -> None:
    """--reader spark: compressed values replicate exactly; a claim-check reference (which it does
    not resolve) stops the run, also with --on-error skip, and is not dead-lettered."""
    config = dataclasses.replace(SIM, events=40, partitions=1)
    sim = Simulation(dataclasses.replace(config, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES))
    topic = new_topic(kafka_bootstrap, 1, prefix="large-spark")
    produce(sim, kafka_bootstrap, topic)
    wh = tmp_path / "wh"
    run_engine(kafka_bootstrap, topic, wh, spark, decode=DecodeOptions(compression="snappy"), reader="spark")
    assert check_warehouse(spark, wh, sim.expected) == []

    sim = Simulation(dataclasses.replace(config, claim_check_dir=str(tmp_path / "cc")))
    topic = new_topic(kafka_bootstrap, 1, prefix="large-spark-cc")
    produce(sim, kafka_bootstrap, topic)
    wh = tmp_path / "wh-cc"
    with pytest.raises(ClaimCheckError, match=rf"--reader driver --claim-check-storage .* in topic {topic!r} "
                                              "partition 0 offset "):
        run_engine(kafka_bootstrap, topic, wh, spark, decode=DecodeOptions(compression="snappy"), reader="spark",
                   on_error="skip")
    assert read_dead_letters(spark, Warehouse(wh)) == []


def test_claim_check_files_are_read_from_an_object_store(s3_store: S3Server) -> None:
    """--claim-check-storage s3a://bucket/prefix: the same store access as an s3a:// warehouse."""
    prefix = s3_store.new_prefix("claim-check")
    url = f"s3a://{s3_store.bucket}/{prefix}"
    client = s3_store.client()
    refs: list[str] = []

    def write(key: bytes, value: bytes) -> str:
        name = f"{len(refs):04d}.json"
        client.put_object(Bucket=s3_store.bucket, Key=f"{prefix}/{name}", Body=claim_check_envelope(key, value))
        refs.append(name)
        return f"s3://upstream/elsewhere/{name}"  # only the file name counts

    big = RowChange(7, "test", "t1", Op.INSERT, columns=(
        Column("id", int(TypeCode.LONG), int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY), 1),
        Column("v", int(TypeCode.VARCHAR), 0, "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(40)))))
    (message,) = encode_rows([big], compression="lz4", max_message_bytes=1000, claim_check=write)
    opts = DecodeOptions(compression="lz4")
    pos = Position("cdc", 0, 5)
    events = decode(*message, options=opts, position=pos)
    assert refs == ["0000.json"] and events != [big]
    assert ClaimChecks(url, codec_for("open"), opts).resolve(events, pos) == [big]
    client.delete_object(Bucket=s3_store.bucket, Key=f"{prefix}/0000.json")
    with pytest.raises(ClaimCheckError, match=rf"offset 5\).*no file {url}/0000\.json"):
        ClaimChecks(url, codec_for("open"), opts).resolve(events, pos)
