"""How to reach the object store: one set of options for the replicator's own S3 client and for
Spark's s3a file system, so both talk to the same endpoint the same way.

Credentials are never options: both clients take them from the standard AWS sources
(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE and the shared
files, container and instance roles). The endpoint (S3-compatible stores), path-style access and
the region are options: `--s3-endpoint` / REPLICATOR_S3_ENDPOINT, `--s3-path-style`,
AWS_REGION (or AWS_DEFAULT_REGION).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from replicator.errors import ConfigError

ENDPOINT_ENV = "REPLICATOR_S3_ENDPOINT"
PATH_STYLE_ENV = "REPLICATOR_S3_PATH_STYLE"
RETRY_BUDGET_ENV = "REPLICATOR_STORAGE_RETRY_BUDGET"
CONDITIONAL_ENV = "REPLICATOR_S3_CONDITIONAL_WRITES"
DEFAULT_REGION = "us-east-1"
DEFAULT_RETRY_BUDGET_S = 60.0

# The AWS SDK's default chain (environment, system properties, web identity, AWS_PROFILE and the
# shared files, container and instance roles): what every other AWS tool reads. Hadoop's own
# default chain reads neither profiles nor AWS_SESSION_TOKEN alone.
S3A_CREDENTIALS = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name}={text!r}: expected true/false, 1/0 or yes/no")


@dataclass(frozen=True)
class StorageOptions:
    """The object store's endpoint (None: AWS itself), path-style addressing (None: on when an
    endpoint is given), region, and how long an unreachable store is retried before a run stops."""

    endpoint: str | None = None
    path_style: bool | None = None
    region: str | None = None
    retry_budget_s: float = DEFAULT_RETRY_BUDGET_S
    spark_conf: dict[str, str] = field(default_factory=dict)
    # Whether the store must honour conditional PUTs (docs/object-store.md "Two writers"): a run on
    # a store that ignores them is refused unless this is off (one writer ensured by other means).
    conditional_writes: bool = True

    @classmethod
    def from_env(cls) -> StorageOptions:
        path_style = os.environ.get(PATH_STYLE_ENV)
        conditional = os.environ.get(CONDITIONAL_ENV)
        budget = os.environ.get(RETRY_BUDGET_ENV)
        try:
            retry = float(budget) if budget else DEFAULT_RETRY_BUDGET_S
        except ValueError:
            raise ConfigError(f"{RETRY_BUDGET_ENV}={budget!r}: expected seconds") from None
        return cls(
            endpoint=os.environ.get(ENDPOINT_ENV) or None,
            path_style=_parse_bool(PATH_STYLE_ENV, path_style) if path_style else None,
            region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None,
            retry_budget_s=retry,
            conditional_writes=_parse_bool(CONDITIONAL_ENV, conditional) if conditional else True,
        )

    @property
    def use_path_style(self) -> bool:
        return self.path_style if self.path_style is not None else self.endpoint is not None

    @property
    def region_or_default(self) -> str:
        return self.region or DEFAULT_REGION

    def s3a_conf(self) -> dict[str, str]:
        """Spark confs for Hadoop's s3a file system (also for `s3://` URLs), then the user's own
        pass-through settings (the config file's `[spark]` table), which win."""
        conf = {
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
            "spark.hadoop.fs.s3a.aws.credentials.provider": S3A_CREDENTIALS,
            "spark.hadoop.fs.s3a.endpoint.region": self.region_or_default,
            "spark.hadoop.fs.s3a.path.style.access": str(self.use_path_style).lower(),
            # Bounded retries: an unreachable store fails a statement within about a minute (the
            # run stops, nothing lost) instead of the defaults' several minutes per request.
            "spark.hadoop.fs.s3a.retry.limit": "4",
            "spark.hadoop.fs.s3a.attempts.maximum": "2",
            "spark.hadoop.fs.s3a.connection.establish.timeout": "5s",
        }
        if self.endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
            if self.endpoint.startswith("http://"):
                conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
        conf.update(self.spark_conf)
        return conf


_LOCK = threading.Lock()
_options: StorageOptions | None = None
_on_configure: list[Callable[[], None]] = []


def on_configure(hook: Callable[[], None]) -> None:
    """Call `hook` whenever the options change (the S3 store drops its cached clients, s3.py)."""
    _on_configure.append(hook)


def configure(options: StorageOptions | None = None, **changes: object) -> StorageOptions:
    """Set the process's storage options (the CLI does, from its settings); `changes` amend the
    current ones. Takes effect for stores and Spark sessions made afterwards."""
    global _options
    with _LOCK:
        base = options if options is not None else (_options or StorageOptions.from_env())
        _options = replace(base, **changes) if changes else base  # type: ignore[arg-type]
        for hook in _on_configure:
            hook()
        return _options


def storage_options() -> StorageOptions:
    """The process's storage options: as configured, else from the environment."""
    with _LOCK:
        return _options if _options is not None else StorageOptions.from_env()
