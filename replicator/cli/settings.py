"""Typed settings for the `replicator` command: every default lives here, once.

`ReplicatorSettings` resolves **flag > environment (REPLICATOR_<NAME>) > config file** (`--config FILE`
or REPLICATOR_CONFIG, TOML; keys are the long flag names with '_' or '-'), with pydantic-settings doing
the layering and the type checks. Booleans are parsed strictly (true/false, 1/0, yes/no, any case): a
typo such as `REPLICATOR_UNTIL_CAUGHT_UP=flase` must stop the run, not silently switch the option on.
Passwords are `SecretStr` and come only from the environment or the config file (no flag exists), so
they never reach `--help`, a repr, a log line or `--json-summary`.

The per-command option objects below (`SimulateOptions`, `BinlogWriteOptions`, ...) carry the defaults
of the flags that are not layered (they have no environment twin): the command handlers take these
typed objects and never see argparse.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from replicator.delta.features import DEFAULT_PROFILE, Profile
from replicator.engine.schedule import DEFAULT_APPLY_PARALLELISM
from replicator.errors import ConfigError
from replicator.formats import archive as _archive_format
from replicator.formats import binlog as _binlog_format
from replicator.storage.lease import DEFAULT_LEASE_SECONDS
from replicator.storage.options import DEFAULT_RETRY_BUDGET_S, StorageOptions

ENV_PREFIX = "REPLICATOR_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def parse_bool(value: Any) -> bool:
    """true/false, 1/0, yes/no (any case) and real booleans; anything else is an error.

    Stricter than pydantic's own bool (which also takes on/off, t/f, y/n): one small set to document.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError("expected true/false, 1/0 or yes/no")


StrictBool = Annotated[bool, BeforeValidator(parse_bool)]


def _spark_conf(value: Any) -> Any:
    """The [spark] table: setting name -> value, scalars as Spark takes them (true, 200, 1.5)."""
    if not isinstance(value, dict):
        return value
    def text(v: Any) -> Any:
        if isinstance(v, bool):
            return str(v).lower()
        return str(v) if isinstance(v, str | int | float) else v  # anything else: pydantic says what is wrong

    return {str(k): text(v) for k, v in value.items()}


class ReplicatorSettings(BaseSettings):
    """The layered settings of `run`, `replay`, `tables` and `capture` (field name = flag name with '_')."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # where
    bootstrap_servers: str | None = None
    topic: str | None = None
    protocol: Literal["open", "craft"] | None = None
    warehouse: str | None = None  # a directory or an object-store URL (s3a://bucket/prefix)
    group_id: str | None = None  # None: replicator-<topic> (capture: replicator-capture-<topic>)
    # Kafka security (passwords: environment or config file only)
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: SecretStr | None = None
    # how
    until_caught_up: StrictBool = False
    on_error: Literal["stop", "skip"] = "stop"
    on_ddl_error: Literal["stop", "skip"] = "stop"
    table_features: Profile = DEFAULT_PROFILE
    timezone: str = "UTC"
    legacy: Literal["auto", "legacy", "modern"] = "auto"
    zero_dates: Literal["error", "null"] = "error"
    max_buffer_rows: int = 200_000
    apply_parallelism: int = Field(default=DEFAULT_APPLY_PARALLELISM, ge=1, le=64)
    reader: Literal["driver", "spark"] = "driver"
    kafka_retry_budget: float = 120.0
    wait: StrictBool = False
    json_summary: StrictBool = False
    rotate_bytes: int = _archive_format.DEFAULT_ROTATE_BYTES
    # the warehouse's store (credentials: the standard AWS sources, never a setting)
    s3_endpoint: str | None = None
    s3_path_style: StrictBool | None = None  # None: on when an endpoint is given
    storage_retry_budget: float = Field(default=DEFAULT_RETRY_BUDGET_S, gt=0)
    lease_seconds: float = Field(default=DEFAULT_LEASE_SECONDS, gt=0)
    # Spark and Hadoop settings passed through as they are (the config file's [spark] table)
    spark: Annotated[dict[str, str], BeforeValidator(_spark_conf)] = Field(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init kwargs) > environment > the TOML config file; no .env or secrets directory."""
        return init_settings, env_settings, ConfigFileSource(settings_cls, _config_path(init_settings))

    def require(self, name: str) -> Any:
        """The value of a setting the command cannot do without; ConfigError saying how to give it."""
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"{flag_name(name)} is required (or set {env_name(name)}, or `{name}` in --config)")
        return value

    def storage(self) -> StorageOptions:
        """How to reach the warehouse's store (and Spark's settings beside it)."""
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
        return StorageOptions(endpoint=self.s3_endpoint, path_style=self.s3_path_style, region=region,
                              retry_budget_s=self.storage_retry_budget, spark_conf=dict(self.spark))

    def group_id_for(self, topic: str, *, prefix: str = "replicator") -> str:
        """The consumer group: the setting, or `<prefix>-<topic>`."""
        return self.group_id or f"{prefix}-{topic}"

    def kafka_security(self) -> dict[str, Any]:
        """SASL/SSL settings in kafka-python's names (passwords revealed here only, for the client)."""
        mapping = {
            "security_protocol": "security_protocol", "sasl_mechanism": "sasl_mechanism",
            "sasl_username": "sasl_plain_username", "sasl_password": "sasl_plain_password",
            "ssl_cafile": "ssl_cafile", "ssl_certfile": "ssl_certfile", "ssl_keyfile": "ssl_keyfile",
            "ssl_password": "ssl_password",
        }
        out: dict[str, Any] = {}
        for name, key in mapping.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        return out


#: Secrets: only from the environment or the config file (no flag), and never echoed in an error.
SECRETS = frozenset({"sasl_password", "ssl_password"})


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _config_path(init_settings: PydanticBaseSettingsSource) -> str | None:
    given = init_settings.init_kwargs.get("config") if isinstance(init_settings, InitSettingsSource) else None
    return given or os.environ.get(CONFIG_ENV) or None


def read_config_file(path: str) -> dict[str, Any]:
    """The TOML config file as a flat dict with '_' keys; ConfigError if unreadable."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return {str(k).replace("-", "_"): v for k, v in data.items()}


class ConfigFileSource(PydanticBaseSettingsSource):
    """The lowest layer: `--config FILE` (or REPLICATOR_CONFIG). Unknown keys are ignored."""

    def __init__(self, settings_cls: type[BaseSettings], path: str | None) -> None:
        super().__init__(settings_cls)
        self.path = path
        self.data = read_config_file(path) if path else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k in self.settings_cls.model_fields}


def load_settings(flags: Mapping[str, Any], *, config: str | None = None) -> ReplicatorSettings:
    """Resolve the settings for one command line (flags not given are None and do not count).

    A value of the wrong shape is a ConfigError naming where it came from (the flag, the
    environment variable or the config key), so the user knows what to fix.
    """
    given = {k: v for k, v in flags.items() if v is not None and k in ReplicatorSettings.model_fields}
    kwargs: dict[str, Any] = dict(given)
    if config:
        kwargs["config"] = config
    try:
        return ReplicatorSettings(**kwargs)
    except ValidationError as exc:
        raise _config_error(exc, given, config) from None


def _config_error(exc: ValidationError, given: Mapping[str, Any], config: str | None) -> ConfigError:
    err = exc.errors()[0]
    name = str(err["loc"][0]) if err["loc"] else "?"
    if name in given:
        origin = flag_name(name)
    elif any(k.upper() == env_name(name) for k in os.environ):
        origin = env_name(name)
    else:
        origin = f"`{name}` in config file {config or os.environ.get(CONFIG_ENV)}"
    shown = "" if name in SECRETS else f" (got {err.get('input')!r})"
    return ConfigError(f"{origin}: {err['msg'].removeprefix('Value error, ')}{shown}")


# --- option objects of the commands whose flags are not layered ---------------------------


@dataclass(frozen=True)
class DecodeCommand:
    """`replicator decode`: one captured message (files, '-' = stdin)."""

    protocol: Literal["open", "craft"]
    value: str
    key: str | None = None
    timezone: str = "UTC"
    legacy: Literal["auto", "legacy", "modern"] = "auto"


@dataclass(frozen=True)
class TablesCommand:
    """`replicator tables`."""

    settings: ReplicatorSettings
    json: bool = False


@dataclass(frozen=True)
class RunCommand:
    """`replicator run`: Kafka (default), capture archives or a statement binlog."""

    settings: ReplicatorSettings
    archive: Sequence[str] = ()
    binlog: Sequence[str] = ()


@dataclass(frozen=True)
class ReplayCommand:
    """`replicator replay`: exactly one of the three start points."""

    settings: ReplicatorSettings
    from_earliest: bool = False
    from_offsets: str | None = None
    from_timestamp: str | None = None


@dataclass(frozen=True)
class CaptureCommand:
    """`replicator capture`."""

    settings: ReplicatorSettings
    out: str
    from_earliest: bool = False
    from_offsets: str | None = None


@dataclass(frozen=True)
class ArchiveInspectCommand:
    """`replicator archive inspect PATH...`."""

    paths: Sequence[str | Path]
    limit: int = 120  # bytes of a value shown before it is cut


@dataclass(frozen=True)
class SimulateCommand:
    """`replicator simulate`: Kafka (topic + bootstrap servers) or an archive directory."""

    protocol: Literal["open", "craft"]
    topic: str | None = None
    bootstrap_servers: str | None = None
    out: str | None = None
    seed: int = 1
    events: int = 5000
    partitions: int = 3
    tables: int = 4
    expected: str | None = None
    ddl: str = "auto"


@dataclass(frozen=True)
class BinlogWriteCommand:
    """`replicator binlog write`: exactly one of a statement, commit or rollback."""

    trans: int
    file: str | Path = _binlog_format.DEFAULT_FILE
    server_id: int = _binlog_format.DEFAULT_SERVER_ID
    session_id: int = 0
    sets: Sequence[str] = field(default_factory=tuple)
    commit: bool = False
    rollback: bool = False
    query: str | None = None
    rotate_bytes: int = _binlog_format.DEFAULT_ROTATE_BYTES


@dataclass(frozen=True)
class BinlogReadCommand:
    """`replicator binlog read [FILE...]`."""

    paths: Sequence[str | Path] = (_binlog_format.DEFAULT_FILE,)
    verbose: bool = False


def defaults(cls: type[Any]) -> dict[str, Any]:
    """A command's defaults by field name (for argparse help texts)."""
    if isinstance(cls, type) and issubclass(cls, BaseSettings):
        return {n: f.default for n, f in cls.model_fields.items()}
    fields = getattr(cls, "__dataclass_fields__", {})
    return {n: f.default for n, f in fields.items()}


def options(cls: type[Any], values: Mapping[str, Any], **extra: Any) -> Any:
    """Build a command's option object from parsed flags: a flag not given keeps the default here."""
    names = set(getattr(cls, "__dataclass_fields__", {}))
    return cls(**{k: v for k, v in values.items() if k in names and v is not None}, **extra)
