"""Pytest fixtures for a real S3-compatible server (S3Proxy, replicator/sim/locals3.py): one per test
session, on a free port, with its data in a temp dir, stopped at the end.

Registered for every test through ``pytest_plugins`` in the root conftest (like the Kafka broker's
``tests.kafka_fixtures``); importing ``s3_server`` into a test module works too: the server itself is
reference-counted here, so every fixture definition shares the one server of the process.

Tests share the server: give each its own place with ``s3_server.new_prefix()`` (a unique key prefix in
the bucket ``warehouse``), ``s3_server.warehouse_url()`` (``s3a://warehouse/<unique prefix>``) or
``s3_server.new_bucket()``. A test that stops the server (``s3_server.server.stop()``, then
``.start()``: same port, same data) must start it again; ``with s3_server.stopped(): ...`` does.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from replicator.sim.locals3 import ACCESS_KEY, DEFAULT_BUCKET, REGION, SECRET_KEY, LocalS3

__all__ = ["S3Server", "s3_server"]


@dataclass(frozen=True)
class S3Server:
    """The session's server: where it is, its credentials, and helpers for a test's own place in it."""

    server: LocalS3
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION
    bucket: str = DEFAULT_BUCKET

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` (path-style addressing)."""
        return self.server.endpoint

    def env(self) -> dict[str, str]:
        """AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and REPLICATOR_S3_ENDPOINT for this server."""
        return self.server.env()

    def new_prefix(self, name: str = "test") -> str:
        """A key prefix no other test uses (no slashes around it)."""
        return f"{name}-{uuid.uuid4().hex[:12]}"

    def warehouse_url(self, name: str = "test") -> str:
        """``s3a://warehouse/<unique prefix>``: a fresh warehouse in the default bucket."""
        return self.server.warehouse_url(self.new_prefix(name))

    def new_bucket(self, name: str = "test") -> str:
        """Create a bucket no other test uses and return its name."""
        return self.server.create_bucket(f"{name}-{uuid.uuid4().hex[:12]}")

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server (path-style; `config` amends botocore's Config)."""
        import boto3
        from botocore.config import Config

        settings: dict[str, Any] = {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 2},
                                    "connect_timeout": 5, "read_timeout": 30, **config}
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.region, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key, config=Config(**settings))

    def s3a_conf(self) -> dict[str, str]:
        """Spark confs for Hadoop's s3a file system on this server (explicit credentials)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": self.region,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": self.access_key,
            "spark.hadoop.fs.s3a.secret.key": self.secret_key,
        }

    @contextlib.contextmanager
    def stopped(self, *, kill: bool = False) -> Iterator[None]:
        """The server down for the block (SIGTERM, or SIGKILL: a crash), then up again on the same
        port with the same data."""
        self.server.stop(kill=kill)
        try:
            yield
        finally:
            self.server.start()


class _SharedServer:
    """A single server for however many fixture definitions request it; stopped when the last one ends."""

    def __init__(self) -> None:
        self.users = 0
        self.handle: S3Server | None = None

    def acquire(self, tmp_path_factory: pytest.TempPathFactory) -> S3Server:
        if self.handle is None:
            server = LocalS3(tmp_path_factory.mktemp("s3"), detach=False)
            self.handle = S3Server(server.start())
        self.users += 1
        return self.handle

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.handle is not None:
            handle, self.handle = self.handle, None
            handle.server.stop()


_SHARED = _SharedServer()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The session's S3-compatible server; tests share it, so use own prefixes or buckets."""
    handle = _SHARED.acquire(tmp_path_factory)
    try:
        yield handle
    finally:
        _SHARED.release()
