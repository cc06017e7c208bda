"""An S3 (or S3-compatible) bucket as a store, through boto3.

A PUT replaces an object atomically (readers see the old or the new object), so `write` is one
PUT. Conditional writes are S3's own: `If-None-Match: *` creates only if absent, `If-Match: <etag>`
replaces only if unchanged; a store that answers 412 refused the condition. An unreachable store
is retried for the storage retry budget, then the run stops naming the URL and the endpoint
(never a credential).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from replicator.errors import StorageError
from replicator.storage.fileio import FileIO, Versioned, scheme_of
from replicator.storage.options import StorageOptions, on_configure, storage_options

log = logging.getLogger("replicator")
T = TypeVar("T")

_CLIENT_LOCK = threading.Lock()
_shared: dict[tuple[object, ...], S3FileIO] = {}

_CREDENTIAL_CODES = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken",
                               "ExpiredToken", "InvalidClientTokenId", "AuthorizationHeaderMalformed"})
_CONDITION_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


def forget_clients() -> None:
    """Drop the cached stores (the options changed)."""
    with _CLIENT_LOCK:
        _shared.clear()


on_configure(forget_clients)


def _age(resp: dict[str, Any]) -> float | None:
    """Seconds since the object was last written, both ends read off the store's own clock: the
    answer's `Date` header less the object's `Last-Modified` (whole seconds each); None when the
    store sent either without a date."""
    from email.utils import parsedate_to_datetime

    last = resp.get("LastModified")
    date = (resp.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    if last is None or not date:
        return None
    try:
        return max(0.0, float((parsedate_to_datetime(str(date)) - last).total_seconds()))
    except (TypeError, ValueError):
        return None


def split_url(url: str) -> tuple[str, str]:
    """(bucket, key) of `s3a://bucket/key`."""
    rest = url.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key


class S3FileIO(FileIO):
    def __init__(self, options: StorageOptions) -> None:
        import boto3
        from botocore.config import Config

        self.options = options
        config = Config(
            s3={"addressing_style": "path" if options.use_path_style else "auto"},
            retries={"mode": "standard", "max_attempts": 3},
            connect_timeout=5, read_timeout=30,
            # Checksums only where S3 requires them: S3-compatible stores differ in which of the
            # newer flexible checksums they accept.
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        )
        session = boto3.session.Session()
        self.client: Any = session.client("s3", endpoint_url=options.endpoint,
                                          region_name=options.region_or_default, config=config)

    @classmethod
    def shared(cls) -> S3FileIO:
        """One client per set of options (boto3 clients are thread-safe)."""
        options = storage_options()
        key = (options.endpoint, options.use_path_style, options.region_or_default, options.retry_budget_s)
        with _CLIENT_LOCK:
            io = _shared.get(key)
            if io is None:
                io = _shared[key] = cls(options)
            return io

    def describe(self) -> str:
        return f"the object store at {self.options.endpoint}" if self.options.endpoint else "Amazon S3"

    # -- errors and retries ------------------------------------------------------------------------
    def _call(self, url: str, what: str, run: Callable[[], T]) -> T:
        """`run()`, retried while the store is unreachable (up to the retry budget); any other
        failure becomes a StorageError naming the URL, the store and what to do."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            ConnectTimeoutError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        started: float | None = None
        delay = 0.5
        while True:
            try:
                return run()
            except ClientError as exc:
                raise self._client_error(exc, url, what) from None
            except NoCredentialsError:
                raise StorageError(
                    f"cannot {what} {url}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run with an instance role") from None
            except (ConnectionError, ConnectTimeoutError, ReadTimeoutError) as exc:
                now = time.monotonic()
                started = now if started is None else started
                if now - started >= self.options.retry_budget_s:
                    raise StorageError(
                        f"cannot {what} {url}: {self.describe()} has been unreachable for "
                        f"{now - started:.0f}s ({type(exc).__name__}); nothing was lost: run again once it is "
                        "reachable (REPLICATOR_STORAGE_RETRY_BUDGET sets how long to wait)") from None
                if delay == 0.5:
                    log.warning("%s is unreachable (%s); retrying for up to %.0fs", self.describe(),
                                type(exc).__name__, self.options.retry_budget_s)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            except BotoCoreError as exc:
                raise StorageError(f"cannot {what} {url} on {self.describe()}: {exc}") from None

    def _client_error(self, exc: Any, url: str, what: str) -> StorageError:
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        bucket, _ = split_url(url)
        if code == "NoSuchBucket":
            return StorageError(f"cannot {what} {url}: bucket {bucket!r} does not exist on {self.describe()}; "
                                "create it, or give another --warehouse")
        if code in _CREDENTIAL_CODES or status == 403:
            return StorageError(f"cannot {what} {url}: {self.describe()} refused the credentials ({code or status}); "
                                "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the "
                                "bucket's permissions")
        return StorageError(f"cannot {what} {url} on {self.describe()}: {code or status} {err.get('Message', '')}"
                            .rstrip())

    def _etag(self, etag: object, url: str, what: str) -> str:
        """A response's entity tag: every S3 GET and PUT answers one, and the writer lease and the
        progress writes are conditioned on it, so one without it stops the run (not a KeyError)."""
        if not etag:
            raise StorageError(
                f"cannot {what} {url}: {self.describe()} answered without an ETag, which the writer lease and "
                "the progress writes are conditioned on (If-Match); the store does not support ETags or "
                "conditional writes: check that --s3-endpoint is an S3-compatible store that does (Amazon S3, "
                "S3Proxy 4 or later, most others), or use a local directory (--s3-conditional-writes false "
                "does not help here: the lease still needs ETags)")
        return str(etag)

    @staticmethod
    def _code(exc: Any) -> str:
        return str(exc.response.get("Error", {}).get("Code", ""))

    # -- FileIO ------------------------------------------------------------------------------------
    def _get(self, url: str) -> tuple[bytes, str | None, float | None] | None:
        from botocore.exceptions import ClientError

        bucket, key = split_url(url)

        def get() -> tuple[bytes, str | None, float | None] | None:
            try:
                resp = self.client.get_object(Bucket=bucket, Key=key)
            except ClientError as exc:
                if self._code(exc) in ("NoSuchKey", "404"):
                    return None
                raise
            etag = resp.get("ETag")
            return resp["Body"].read(), str(etag) if etag else None, _age(resp)

        return self._call(url, "read", get)

    def read(self, path: str) -> bytes | None:
        got = self._get(path)
        return None if got is None else got[0]

    def read_versioned(self, path: str) -> Versioned | None:
        got = self._get(path)
        return None if got is None else Versioned(got[0], self._etag(got[1], path, "read the entity tag of"), got[2])

    def write(self, path: str, data: bytes) -> None:
        bucket, key = split_url(path)
        self._call(path, "write", lambda: self.client.put_object(Bucket=bucket, Key=key, Body=data))

    def _conditional_put(self, path: str, data: bytes, **condition: str) -> str | None:
        from botocore.exceptions import ClientError

        bucket, key = split_url(path)

        def put() -> str | None:
            try:
                resp = self.client.put_object(Bucket=bucket, Key=key, Body=data, **condition)
            except ClientError as exc:
                if self._code(exc) in _CONDITION_CODES or self._code(exc) in ("NoSuchKey", "404"):
                    return None
                raise
            return self._etag(resp.get("ETag"), path, "write")

        return self._call(path, "write", put)

    def create(self, path: str, data: bytes) -> str | None:
        return self._conditional_put(path, data, IfNoneMatch="*")

    def replace(self, path: str, data: bytes, etag: str) -> str | None:
        return self._conditional_put(path, data, IfMatch=etag)

    def exists(self, path: str) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = split_url(path)
        key = key.rstrip("/")

        def probe() -> bool:
            if key:
                try:
                    self.client.head_object(Bucket=bucket, Key=key)
                    return True
                except ClientError as exc:
                    if self._code(exc) not in ("404", "NoSuchKey", "NotFound"):
                        raise
            resp = self.client.list_objects_v2(Bucket=bucket, Prefix=f"{key}/" if key else "", MaxKeys=1)
            return bool(resp.get("KeyCount"))

        return self._call(path, "look up", probe)

    @staticmethod
    def _prefix(path: str) -> str:
        """The key prefix of the objects below `path` ("" at a bucket's top)."""
        key = split_url(path)[1].rstrip("/")
        return key + "/" if key else ""

    def _pages(self, path: str, **extra: Any) -> Iterator[dict[str, Any]]:
        bucket, prefix = split_url(path)[0], self._prefix(path)
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **extra}
            if token:
                args["ContinuationToken"] = token
            resp: dict[str, Any] = self._call(path, "list", functools.partial(self.client.list_objects_v2, **args))
            yield resp
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return

    def files(self, path: str) -> Iterator[tuple[str, int]]:
        scheme = scheme_of(path)
        bucket, _ = split_url(path)
        for page in self._pages(path):
            for obj in page.get("Contents", []):
                yield f"{scheme}://{bucket}/{obj['Key']}", int(obj["Size"])

    def children(self, path: str) -> list[str]:
        return self._children(path)

    def children_from(self, path: str, first: str) -> list[str]:
        # StartAfter is exclusive: after a proper prefix of `first` (lower than it), then kept >= it
        return [n for n in self._children(path, StartAfter=self._prefix(path) + first[:-1]) if n >= first] if first \
            else self._children(path)

    def _children(self, path: str, **extra: Any) -> list[str]:
        names: set[str] = set()
        for page in self._pages(path, Delimiter="/", **extra):
            for obj in page.get("Contents", []):
                names.add(str(obj["Key"]).rsplit("/", 1)[-1])
            for pre in page.get("CommonPrefixes", []):
                names.add(str(pre["Prefix"]).rstrip("/").rsplit("/", 1)[-1])
        names.discard("")
        return sorted(names)

    def remove(self, path: str) -> None:
        bucket, key = split_url(path)
        self._call(path, "remove", functools.partial(self.client.delete_object, Bucket=bucket, Key=key))

    def remove_tree(self, path: str) -> None:
        self.remove_listed(path, [url for url, _ in self.files(path)])

    def remove_listed(self, path: str, files: Sequence[str]) -> None:
        bucket, _ = split_url(path)
        keys = [split_url(url)[1] for url in files]
        for i in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[i:i + 1000]]
            self._call(path, "remove", functools.partial(
                self.client.delete_objects, Bucket=bucket, Delete={"Objects": chunk, "Quiet": True}))
