"""The local S3-compatible server (S3Proxy through replicator/sim/locals3.py) with boto3: the S3
features the replicator's object-store warehouse relies on (round trips, listings, conditional writes
checked atomically, authentication), a stop and restart on the same port and data, and the
`make s3-up` / `make s3-down` CLI contract."""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from replicator.sim import locals3
from replicator.sim.localkafka.process import free_ports, pid_alive
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


def _status(exc: ClientError) -> int:
    return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])


def test_put_get_list_delete(s3_server: S3Server) -> None:
    s3, prefix = s3_server.client(), s3_server.new_prefix()
    keys = [f"{prefix}/a/{i}.json" for i in range(3)] + [f"{prefix}/b/x.json"]
    for i, key in enumerate(keys):
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=f'{{"n": {i}}}'.encode())
    assert s3.get_object(Bucket=s3_server.bucket, Key=keys[1])["Body"].read() == b'{"n": 1}'

    listed = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/a/")
    assert [o["Key"] for o in listed["Contents"]] == keys[:3]
    dirs = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/", Delimiter="/")
    assert sorted(p["Prefix"] for p in dirs["CommonPrefixes"]) == [f"{prefix}/a/", f"{prefix}/b/"]
    page = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/", MaxKeys=2)
    assert page["IsTruncated"] and len(page["Contents"]) == 2
    rest = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/",
                              ContinuationToken=page["NextContinuationToken"])
    assert [o["Key"] for o in page["Contents"] + rest["Contents"]] == sorted(keys)

    s3.delete_object(Bucket=s3_server.bucket, Key=keys[0])
    s3.delete_objects(Bucket=s3_server.bucket, Delete={"Objects": [{"Key": k} for k in keys[1:3]]})
    left = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/")
    assert [o["Key"] for o in left["Contents"]] == keys[3:]
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=s3_server.bucket, Key=keys[0])
    assert _status(missing.value) == 404


def test_if_none_match_creates_only_when_absent(s3_server: S3Server) -> None:
    s3, key = s3_server.client(), f"{s3_server.new_prefix()}/lease"
    s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert _status(refused.value) == 412
    assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"first"


def test_if_match_replaces_only_when_unchanged(s3_server: S3Server) -> None:
    s3, key = s3_server.client(), f"{s3_server.new_prefix()}/lease"
    etag = s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v1")["ETag"]
    assert s3.head_object(Bucket=s3_server.bucket, Key=key)["ETag"] == etag
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v2", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert _status(refused.value) == 412
    new_etag = s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v2", IfMatch=etag)["ETag"]
    assert new_etag != etag
    assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"v2"
    with pytest.raises(ClientError) as stale:  # the old ETag no longer matches
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v3", IfMatch=etag)
    assert _status(stale.value) == 412


def test_a_read_says_how_old_the_object_is_by_the_store_s_clock(s3_store: S3Server) -> None:
    """What a lease taker compares with the holder's term instead of its own wall clock
    (storage/lease.py): the answer's Date less the object's Last-Modified, both the store's."""
    import time

    from replicator.storage import fileio_for

    url = f"{s3_store.warehouse_url('age')}/lease.json"
    io = fileio_for(url)
    io.write(url, b"{}")
    time.sleep(2.2)
    got = io.read_versioned(url)
    assert got is not None and got.age is not None and 1.0 <= got.age <= 10.0, got


def test_the_start_up_probe_of_conditional_writes_passes(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe a run makes before taking its lease (storage/fenced.py): a second If-None-Match: *
    create and a PUT with an outdated If-Match are both refused; the scratch object is removed."""
    from replicator.storage.fenced import conditional_write_failure, require_conditional_writes
    from replicator.storage.options import StorageOptions
    from replicator.storage.s3 import S3FileIO

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    store = S3FileIO(StorageOptions(endpoint=s3_server.endpoint, region=s3_server.region))
    prefix = s3_server.new_prefix()
    directory = f"s3a://{s3_server.bucket}/{prefix}/_replicator"
    assert conditional_write_failure(store, directory) is None
    require_conditional_writes(store, directory)
    listed = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/")
    assert listed.get("KeyCount") == 0, listed.get("Contents")


def test_wrong_secret_and_anonymous_requests_are_refused(s3_server: S3Server) -> None:
    import boto3
    from botocore.config import Config

    key = f"{s3_server.new_prefix()}/secret"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b"x")
    bad = boto3.session.Session().client(
        "s3", endpoint_url=s3_server.endpoint, region_name=s3_server.region, aws_access_key_id=s3_server.access_key,
        aws_secret_access_key="not-the-secret", config=Config(s3={"addressing_style": "path"}))
    with pytest.raises(ClientError) as refused:
        bad.get_object(Bucket=s3_server.bucket, Key=key)
    assert _status(refused.value) == 403
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for path in (f"{s3_server.bucket}/{key}", f"{s3_server.bucket}?list-type=2"):
        with pytest.raises(urllib.error.HTTPError) as anonymous:
            direct.open(f"{s3_server.endpoint}/{path}", timeout=10)
        assert anonymous.value.code == 403, path


def test_concurrent_create_if_absent_has_one_winner(s3_server: S3Server) -> None:
    s3, prefix, writers = s3_server.client(max_pool_connections=16), s3_server.new_prefix(), 16
    for round_ in range(3):
        key = f"{prefix}/lease-{round_}"
        barrier = threading.Barrier(writers)
        outcomes: dict[int, Any] = {}

        def write(i: int, key: str = key, barrier: threading.Barrier = barrier,
                  outcomes: dict[int, Any] = outcomes) -> None:
            barrier.wait()
            try:
                s3.put_object(Bucket=s3_server.bucket, Key=key, Body=f"writer {i}".encode(), IfNoneMatch="*")
                outcomes[i] = "won"
            except ClientError as exc:
                outcomes[i] = _status(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        winners = [i for i, outcome in outcomes.items() if outcome == "won"]
        assert len(outcomes) == writers and len(winners) == 1, outcomes
        assert all(outcome == 412 for i, outcome in outcomes.items() if i != winners[0]), outcomes
        body = s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()
        assert body == f"writer {winners[0]}".encode()


def test_new_bucket_is_private_and_usable(s3_server: S3Server) -> None:
    s3, bucket = s3_server.client(), s3_server.new_bucket()
    assert bucket in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]
    assert s3_server.new_bucket() != bucket
    with pytest.raises(locals3.LocalS3Error):
        s3_server.server.create_bucket("../escape")


def test_stop_and_restart_keep_port_and_data(s3_server: S3Server) -> None:
    s3, key = s3_server.client(retries={"mode": "standard", "max_attempts": 1}), f"{s3_server.new_prefix()}/kept"
    s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"kept")
    endpoint, pid = s3_server.endpoint, s3_server.server.pid
    assert pid is not None
    with s3_server.stopped(kill=True):
        assert not pid_alive(pid)
        with pytest.raises(EndpointConnectionError):
            s3.head_object(Bucket=s3_server.bucket, Key=key)
    assert s3_server.endpoint == endpoint and s3_server.server.pid != pid
    assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"kept"
    with s3_server.stopped():  # a clean stop (SIGTERM) too
        pass
    assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"kept"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "replicator.sim.locals3", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_cli_up_status_down(tmp_path: Path) -> None:
    state, port = tmp_path / "s3", free_ports(1)[0]
    try:
        up = _cli("up", "--state-dir", str(state), "--port", str(port))
        assert up.returncode == 0, up.stderr
        assert f"export REPLICATOR_S3_ENDPOINT=http://127.0.0.1:{port}" in up.stdout.splitlines()
        assert f"export AWS_ACCESS_KEY_ID={locals3.ACCESS_KEY}" in up.stdout.splitlines()
        assert "s3a://warehouse/<prefix>" in up.stdout
        assert (state / "data" / "warehouse").is_dir()
        again = _cli("up", "--state-dir", str(state), "--port", str(port))
        assert again.returncode == 0 and "already running" in again.stderr and again.stdout == up.stdout
        status = _cli("status", "--state-dir", str(state))
        assert status.returncode == 0 and status.stdout.strip() == f"http://127.0.0.1:{port}"
    finally:
        down = _cli("down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped" in down.stderr
    assert "not running" in _cli("down", "--state-dir", str(state)).stderr
    assert _cli("status", "--state-dir", str(state)).returncode == 1
