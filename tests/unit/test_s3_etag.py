"""An S3-compatible store that answers without an ETag: the run stops with a StorageError naming the
object and what to do, not a KeyError (boto3's client stubbed; the real server is in
tests/integration/test_s3_server.py)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from replicator.errors import StorageError
from replicator.storage.options import StorageOptions
from replicator.storage.s3 import S3FileIO


class _NoETagClient:
    """GET and PUT answer as a store without entity tags would: no `ETag` in the response."""

    def get_object(self, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(b"{}")}

    def put_object(self, **_: Any) -> dict[str, Any]:
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}


@pytest.fixture()
def store() -> S3FileIO:
    s3 = S3FileIO(StorageOptions(endpoint="http://127.0.0.1:9", region="us-east-1"))
    s3.client = _NoETagClient()
    return s3


@pytest.mark.parametrize("call", ["read_versioned", "create", "replace"])
def test_a_response_without_an_etag_is_a_storage_error_naming_the_object(store: S3FileIO, call: str) -> None:
    url = "s3a://bucket/wh/_replicator/lease.json"
    with pytest.raises(StorageError) as err:
        if call == "read_versioned":
            store.read_versioned(url)
        elif call == "create":
            store.create(url, b"{}")
        else:
            store.replace(url, b"{}", '"0123"')
    message = str(err.value)
    assert url in message and "http://127.0.0.1:9" in message and "without an ETag" in message
    assert "\n" not in message and "--s3-conditional-writes false" in message


def test_a_plain_read_needs_no_etag(store: S3FileIO) -> None:
    assert store.read("s3a://bucket/wh/tables/x/_delta_log/00000000000000000000.json") == b"{}"
