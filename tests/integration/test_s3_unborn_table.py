"""`clear_unborn_table` on a real S3-compatible server (tests/s3_fixtures.py): a table prefix with a
`_delta_log` and no commit is removed, exactly the keys it listed; a commit written after that
listing (here: while the lease is checked) stays. Without Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replicator.delta.writer import clear_unborn_table
from replicator.storage import StorageOptions, configure, storage_options
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


@pytest.fixture()
def store(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    saved = storage_options()
    configure(StorageOptions(endpoint=s3_server.endpoint, region=s3_server.region))
    try:
        yield s3_server
    finally:
        configure(saved)


def test_an_unborn_table_on_s3_is_removed_but_not_a_commit_written_since(store: S3Server) -> None:
    s3, prefix = store.client(), store.new_prefix()
    table = f"s3a://{store.bucket}/{prefix}/t-1"
    for key in ("_delta_log/_staged_commits/00000000000000000000.1b2c.json", "part-00000.parquet"):
        s3.put_object(Bucket=store.bucket, Key=f"{prefix}/t-1/{key}", Body=b"x")
    commit = f"{prefix}/t-1/_delta_log/00000000000000000000.json"

    def fence() -> None:  # another writer's CREATE TABLE lands between the listing and the removal
        s3.put_object(Bucket=store.bucket, Key=commit, Body=b"{}")

    assert clear_unborn_table(table, fence)
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=store.bucket, Prefix=f"{prefix}/").get("Contents", [])]
    assert left == [commit]
    assert not clear_unborn_table(table), "a table with a commit is kept"
