"""`make run`'s demo against the session broker (a small workload, one protocol); `--s3` against the
session's S3-compatible server (reused as a running server of its state dir)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from replicator.errors import ConfigError
from replicator.sim import demo
from replicator.storage import fileio_for
from replicator.warehouse import Warehouse
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


def test_demo_replicates_and_checks(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPLICATOR_SPARK_LOG_LEVEL", "ERROR")
    wh = tmp_path / "warehouse"
    (wh / "_replicator").mkdir(parents=True)  # a previous demo run's warehouse: recreated
    (wh / "_replicator" / "state.json").write_text("{}")
    args = ["--warehouse", str(wh), "--bootstrap-servers", kafka_bootstrap, "--events", "400", "--protocols", "open",
            "--ddl", "none", "--state-dir", str(tmp_path / "state")]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    assert "check  open: every table equals the simulator's expected state" in out
    assert "make notebook" in out and "shop.customers" in out and "lag" in out
    assert (tmp_path / "state" / "expected-open.json").exists()
    assert list((tmp_path / "state" / "archive").glob("archive-*.rcf"))
    state = Warehouse(wh).load_state()
    assert state.source and state.source.startswith(demo.TOPIC_PREFIX) and state.applied_ts > 0


def test_demo_into_the_local_s3_server(kafka_bootstrap: str, spark: Any, s3_store: S3Server, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPLICATOR_SPARK_LOG_LEVEL", "ERROR")
    s3 = s3_store  # the demo sets this process's storage options and AWS environment: to the same values
    url = s3.warehouse_url("demo")
    client = s3.client()
    _, prefix = url.split("://", 1)[1].split("/", 1)
    # A previous demo run's Craft warehouse: recreated; objects that are not a warehouse: refused.
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}-craft/_replicator/state.json", Body=b"{}")
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}-craft/tables/x/part-0.parquet", Body=b"old")
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}-mine/notes.txt", Body=b"keep me")
    args = ["--s3", "--s3-state-dir", str(s3.server.state_dir), "--warehouse", url, "--bootstrap-servers",
            kafka_bootstrap, "--events", "300", "--protocols", "craft", "--ddl", "none", "--state-dir",
            str(tmp_path / "state"), "--skip-capture"]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    assert f"local S3-compatible server already running on {s3.endpoint}" in out  # the running one, reused
    assert "check  craft: every table equals the simulator's expected state" in out
    assert f"REPLICATOR_WAREHOUSE={url}-craft make notebook" in out
    assert f"locals3 up --state-dir {s3.server.state_dir})" in out  # not the default server's commands
    assert f"locals3 down --state-dir {s3.server.state_dir}" in out and "make s3-down" not in out
    assert os.environ["REPLICATOR_S3_ENDPOINT"] == s3.endpoint  # for this process and its subprocesses
    state = Warehouse(f"{url}-craft").load_state()
    assert state.source and state.source.startswith(demo.TOPIC_PREFIX) and state.applied_ts > 0
    assert all(e.path.startswith(f"{url}-craft/tables/") for e in state.tables.values())
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket, Prefix=f"{prefix}-craft/")["Contents"]}
    assert f"{prefix}-craft/tables/x/part-0.parquet" not in keys
    assert not fileio_for(url).exists(url), "only the protocols run get a warehouse"
    with pytest.raises(ConfigError, match="not a replicator warehouse"):
        demo.recreate_warehouse(f"{url}-mine")
    assert client.get_object(Bucket=s3.bucket, Key=f"{prefix}-mine/notes.txt")["Body"].read() == b"keep me"
