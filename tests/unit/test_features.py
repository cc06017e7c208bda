"""Table-feature policy and the protocol read from `_delta_log` (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.delta import features
from replicator.errors import ConfigError


def _commit(log: Path, version: int, *actions: dict[str, object]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_profiles() -> None:
    assert features.create_properties("compatible") == {"delta.enableChangeDataFeed": "true"}
    assert features.create_properties("fast") == {
        "delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true",
        "delta.enableTypeWidening": "true", "delta.enableChangeDataFeed": "true"}
    with pytest.raises(ConfigError, match="compatible, fast"):
        features.check_profile("quick")


def test_enabled_reads_the_property() -> None:
    assert features.enabled({"delta.columnMapping.mode": "id"}, "columnMapping")
    assert not features.enabled({"delta.columnMapping.mode": "none"}, "columnMapping")
    assert not features.enabled({}, "typeWidening")
    assert features.enabled({"delta.enableTypeWidening": "TRUE"}, "typeWidening")


def test_reader_features_from_commits(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    assert features.reader_features(tmp_path) == []
    _commit(log, 0, {"commitInfo": {}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}})
    assert features.reader_features(tmp_path) == []
    _commit(log, 1, {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}})
    assert features.reader_features(tmp_path) == ["columnMapping"]
    _commit(log, 2, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                  "readerFeatures": ["typeWidening", "deletionVectors"],
                                  "writerFeatures": ["typeWidening", "deletionVectors", "changeDataFeed"]}})
    assert features.reader_features(tmp_path) == ["deletionVectors", "typeWidening"]
    assert features.readers_of(["deletionVectors"]) == ["spark", "deltalake-sql", "polars"]
    assert features.readers_of(["typeWidening"]) == ["spark"]


def test_reader_features_from_a_checkpoint(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    protocol = pa.array([None, {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"]}])
    pq.write_table(pa.table({"protocol": protocol}), log / f"{10:020d}.checkpoint.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 10, "size": 2}))
    _commit(log, 9, {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}})  # before the checkpoint
    _commit(log, 11, {"add": {"path": "x.parquet"}})
    assert features.reader_features(tmp_path) == ["timestampNtz"]


def test_names_delta_stores_only_with_column_mapping_get_it_on_every_profile() -> None:
    assert not features.needs_column_mapping(["id", "naïve", "a-b", "`x`", "$x"])
    for name in ["c;d", "ü名 x", "${env:HOME}", "a,b", "f(x)", "k=v", "tab\there", "new\nline", "{"]:
        assert features.needs_column_mapping(["id", name]), name
    assert features.create_properties("compatible", ["id", "c;d"]) == {
        "delta.enableChangeDataFeed": "true", "delta.columnMapping.mode": "name"}
    assert features.create_properties("compatible", ["id", "v"]) == {"delta.enableChangeDataFeed": "true"}
    assert features.create_properties("fast", ["c;d"])["delta.columnMapping.mode"] == "name"
