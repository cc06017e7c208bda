"""Typed settings for the `replicator` command: every default lives here, once.

`ReplicatorSettings` resolves **flag > environment (REPLICATOR_<NAME>) > config file** (`--config FILE`
or REPLICATOR_CONFIG, TOML; keys are the long flag names with '_' or '-'), with pydantic-settings doing
the layering and the type checks. The config file is strict: a key that is no setting is a ConfigError
naming the key, the file and the closest setting (a typo such as `untill_caught_up = true` once made a
scheduled job a follower that never exits); `[spark]` is its one table, passed through to Spark as it
is. An unknown REPLICATOR_ variable is a warning (the environment is shared with other tools).
Booleans are parsed strictly (true/false, 1/0, yes/no, any case): a typo such as
`REPLICATOR_UNTIL_CAUGHT_UP=flase` must stop the run, not silently switch the option on.
Passwords are `SecretStr` and come only from the environment or the config file (no flag exists), so
they never reach `--help`, a repr, a log line or `--json-summary`.

The per-command option objects below (`SimulateOptions`, `BinlogWriteOptions`, ...) carry the defaults
of the flags that are not layered (they have no environment twin): the command handlers take these
typed objects and never see argparse.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, InitSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from replicator.cli.maintain_settings import MaintainFields
from replicator.codec.limits import DEFAULT_MAX_MESSAGE_BYTES
from replicator.delta.features import DEFAULT_PROFILE, Profile
from replicator.delta.schemachange import DEFAULT_REWRITE_LIMIT, DEFAULT_SCHEMA_CHANGE, SchemaChange, parse_size
from replicator.engine.options import DEFAULT_FLUSH_INTERVAL_S, DEFAULT_MAX_BUFFER_ROWS, DEFAULT_SPILL_ROWS
from replicator.engine.schedule import DEFAULT_APPLY_PARALLELISM
from replicator.errors import ConfigError
from replicator.formats import archive as _archive_format
from replicator.formats import binlog as _binlog_format
from replicator.metrics import DEFAULT_MAX_TABLES
from replicator.shards import ShardSpec, shard_setting
from replicator.storage.lease import DEFAULT_LEASE_SECONDS
from replicator.storage.options import DEFAULT_RETRY_BUDGET_S, StorageOptions

log = logging.getLogger("replicator")

ENV_PREFIX = "REPLICATOR_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"

#: REPLICATOR_* variables that are not settings (no flag, no config key) but are read elsewhere: the
#: Spark session, the JVM, the local test services, the harnesses. An unknown REPLICATOR_ variable
#: gets a warning (`warn_unknown_environment`); these must not. tests/unit/test_cli_settings.py checks
#: that every REPLICATOR_ name in the sources is a setting's variable or listed here.
OTHER_ENV_VARS = (
    CONFIG_ENV,                             # the config file (--config)
    "REPLICATOR_LOG_FORMAT",                # logformat.py: human or json log lines (--log-format)
    "REPLICATOR_SPARK_MASTER",              # runtime/spark.py: the Spark master (default local[*])
    "REPLICATOR_SPARK_JARS",                # runtime/jars.py: the directory of Spark's jars
    "REPLICATOR_MAVEN_REPOSITORY",          # runtime/jars.py: where missing jars are fetched from
    "REPLICATOR_JARS_CACHE",                # runtime/jars.py: where fetched jars are kept
    "REPLICATOR_SPARK_LOG_LEVEL",           # runtime/spark.py: Spark's log level (sim/demo.py sets it)
    "REPLICATOR_SHUFFLE_PARTITIONS",        # runtime/spark.py: spark.sql.shuffle.partitions
    "REPLICATOR_DRIVER_MEMORY",             # runtime/spark.py: spark.driver.memory
    "REPLICATOR_DRIVER_JAVA_OPTIONS",       # runtime/spark.py: extra driver JVM options
    "REPLICATOR_CODEGEN_CACHE_ENTRIES",     # runtime/spark.py: spark.sql.codegen.cache.maxEntries
    "REPLICATOR_JIT",                       # runtime/spark.py: the driver JVM's compiler
    "REPLICATOR_NIO_LOCAL_FS",              # runtime/spark.py: 0 = Hadoop's own local file system
    "REPLICATOR_JVM_ARCHIVE",               # runtime/jvm_archive.py: the JVM's class-data archive
    "REPLICATOR_FAULT",                     # faults.py: crash at a planned instant (tests)
    "REPLICATOR_FAULT_ACTION",              # faults.py: stop (SIGSTOP) instead of crashing there (tests)
    "REPLICATOR_KAFKA_LIBS",                # sim/localkafka: the local broker's classpath
    "REPLICATOR_S3PROXY_LIBS",              # sim/locals3.py: the local S3 server's classpath
    "REPLICATOR_METASTORE_LIBS",            # sim/localcatalog.py: the local metastore's extra jar
    "REPLICATOR_SOAK",                      # tests/reliability: full-size scenarios (make soak)
    "REPLICATOR_KILLS",                     # tests/integration: kill -9 rounds
    "REPLICATOR_KILL_SEED",                 # tests/integration: their random seed
)

#: The config file's tables: `[spark]`, Spark and Hadoop settings passed through (any key). Every
#: other key is a setting, at the top level.
CONFIG_TABLES = frozenset({"spark"})

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
    """The [spark] table: setting name -> value, scalars as Spark takes them (true, 200, 1.5).

    A dotted key written bare (`spark.sql.shuffle.partitions = 8`, a nested table to TOML) is the
    same as the quoted one (`"spark.sql.shuffle.partitions" = 8`).
    """
    if not isinstance(value, dict):
        return value
    def text(v: Any) -> Any:
        if isinstance(v, bool):
            return str(v).lower()
        return str(v) if isinstance(v, str | int | float) else v  # anything else: pydantic says what is wrong

    flat: dict[str, Any] = {}

    def walk(prefix: str, table: Mapping[Any, Any]) -> None:
        for k, v in table.items():
            name = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                walk(name + ".", v)
            elif name in flat:
                raise ValueError(f"{name!r} is given twice (quoted and dotted)")
            else:
                flat[name] = text(v)

    walk("", value)
    return flat


def _size(value: Any) -> int:
    """`--rewrite-limit`: a byte count or a size (`1GiB`); the ConfigError's text as the error."""
    try:
        return parse_size(value, "a size")
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix("a size: ")) from None


def _rules(value: Any) -> Any:
    """`--include` / `--exclude`: a list (flags, config file), or from the environment a JSON array or
    comma-separated rules (a rule holding a comma needs the JSON form)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                raise ValueError("not a JSON array of table-filter rules") from None
        return [r.strip() for r in text.split(",") if r.strip()]
    return value


Rules = Annotated[list[str], NoDecode, BeforeValidator(_rules)]


def _topics(value: Any) -> Any:
    """`--topic`: one name, a list (repeated flag, config file), or comma-separated names from the
    environment (Kafka topic names hold no comma)."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return value


Topics = Annotated[list[str] | None, NoDecode, BeforeValidator(_topics)]


class ReplicatorSettings(MaintainFields):
    """The layered settings of every command (field name = flag name with '_'); `maintain`'s: its base."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # where
    bootstrap_servers: str | None = None
    topic: Topics = None  # one or several topics (a list: topic per table plus the default topic)
    topic_pattern: str | None = None  # every topic whose whole name matches (found as they appear)
    protocol: Literal["open", "craft", "canal-json", "simple", "csv"] | None = None  # csv: --storage-sink only
    # TiCDC's storage sink instead of Kafka (sources/storage_sink.py): where, and its file settings
    storage_sink: str | None = None
    date_separator: Literal["none", "year", "month", "day"] = "day"
    partition_separator: StrictBool = False
    csv_delimiter: str = ","
    csv_quote: str = '"'
    csv_null: str = "\\N"
    csv_binary_encoding: Literal["base64", "hex"] = "base64"
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
    until_caught_up: StrictBool = False
    on_error: Literal["stop", "skip"] = "stop"
    on_ddl_error: Literal["stop", "skip"] = "stop"
    fresh_inserts: Literal["auto", "append", "merge"] = "auto"
    table_features: Profile = DEFAULT_PROFILE
    schema_change: SchemaChange = DEFAULT_SCHEMA_CHANGE
    rewrite_limit: Annotated[int, BeforeValidator(_size)] = DEFAULT_REWRITE_LIMIT
    timezone: str = "UTC"
    legacy: Literal["auto", "legacy", "modern"] = "auto"
    zero_dates: Literal["error", "null"] = "error"
    # TiCDC large messages (codec/large.py): the values' compression; where claim-check files are read
    compression: Literal["none", "lz4", "snappy"] = "none"
    claim_check_storage: str | None = None
    max_buffer_rows: int = DEFAULT_MAX_BUFFER_ROWS
    spill_rows: int = Field(default=DEFAULT_SPILL_ROWS, ge=0)  # a full buffer's complete rows go to disk (0: no)
    flush_interval: float = Field(default=DEFAULT_FLUSH_INTERVAL_S, gt=0)  # a follower's step, at most this often
    apply_parallelism: int = Field(default=DEFAULT_APPLY_PARALLELISM, ge=1, le=64)
    reader: Literal["driver", "spark"] = "driver"
    kafka_retry_budget: float = 120.0
    wait: StrictBool = False
    json_summary: StrictBool = False
    rotate_bytes: int = _archive_format.DEFAULT_ROTATE_BYTES
    # the warehouse's store (credentials: the standard AWS sources, never a setting)
    s3_endpoint: str | None = None
    s3_path_style: StrictBool | None = None  # None: on when an endpoint is given
    s3_conditional_writes: StrictBool = True  # storage/options.py CONDITIONAL_ENV
    storage_retry_budget: float = Field(default=DEFAULT_RETRY_BUDGET_S, gt=0)
    lease_seconds: float = Field(default=DEFAULT_LEASE_SECONDS, gt=0)
    # monitoring (replicator/metrics.py)
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_textfile: str | None = None
    metrics_max_tables: int = Field(default=DEFAULT_MAX_TABLES, ge=0)
    # --shard I/N: this run owns the tables whose identity hashes to I of N (replicator/shards.py)
    shard: Annotated[ShardSpec | None, NoDecode, BeforeValidator(shard_setting)] = None
    # table filters (replicator/filters.py)
    include: Rules = Field(default_factory=list)
    exclude: Rules = Field(default_factory=list)
    # tables registered by name in a Hive metastore service (replicator/delta/catalog.py)
    catalog_uri: str | None = None
    catalog_database_prefix: str = ""
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
        """Flags (init kwargs) > environment > the TOML config file; no .env or secrets directory.

        Unknown keys: the config file refuses them (ConfigFileSource); flags are argparse's; the
        environment warns (`warn_unknown_environment`, from `load_settings`). `extra="ignore"` is
        only for the `config` init argument, which names the file and is no field.
        """
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
                              retry_budget_s=self.storage_retry_budget, spark_conf=dict(self.spark),
                              conditional_writes=self.s3_conditional_writes)

    def one_topic(self) -> str:
        """The one topic of a command that reads one (capture): ConfigError for none or several."""
        topics = self.require("topic")
        if len(topics) != 1:
            raise ConfigError(f"--topic: give one topic, not {len(topics)} ({', '.join(topics) or 'none'})")
        return str(topics[0])

    def group_id_for(self, topic: str, *, prefix: str = "replicator", shard: ShardSpec | None = None) -> str:
        """The consumer group: the setting, or `<prefix>-<topic>` (a shard's: `<prefix>-<topic>-shard-I-of-N`)."""
        if self.group_id:
            return self.group_id
        return f"{prefix}-{topic}" + (f"-shard-{shard.label}" if shard is not None else "")

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


def read_config_file(path: str, valid: Collection[str] | None = None) -> dict[str, Any]:
    """The TOML config file as a dict with '_' keys; ConfigError if unreadable (with the line and
    column of a syntax error) or if a key is none of `valid` (default: the settings' fields)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {' '.join(str(exc).split())}") from None
    check_config_keys(data, path, ReplicatorSettings.model_fields if valid is None else valid)
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def check_config_keys(data: Mapping[str, Any], path: str, valid: Collection[str]) -> None:
    """Every key of the file is a setting at the top level or sits in a pass-through table ([spark]);
    else one ConfigError naming the key (dotted when nested), the file and the closest setting.

    `valid` is the fields of ReplicatorSettings, the one model that every command reading the file
    (run, replay, tables, capture, archive inspect) resolves: a key one of them takes, all accept.
    """
    seen: dict[str, str] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in seen:
            raise ConfigError(f"config file {path}: `{seen[name]}` and `{key}` are the same setting: keep one")
        seen[name] = key
        if name in CONFIG_TABLES and isinstance(value, dict):
            _check_pass_through(name, value, path, valid)
        elif name in valid and not (isinstance(value, dict) and value):
            continue  # an empty table here is a wrong type: pydantic says so
        elif value == {}:
            tables = ", ".join(f"[{t}]" for t in sorted(CONFIG_TABLES))
            raise ConfigError(f"unknown table `[{key}]` in config file {path} (the only table is {tables}; "
                              "settings go at the top level)")
        else:
            keys = _first_key(key, value)
            raise ConfigError(f"unknown key `{_toml_key(keys)}` in config file {path} ({_hint(keys, valid)})")


def _check_pass_through(table: str, value: Mapping[str, Any], path: str, valid: Collection[str]) -> None:
    """Any key is accepted; one that is a replicator setting was most likely meant above the table
    (TOML puts every key after `[spark]` into it): a warning, Spark would ignore it."""
    for k in value:
        if isinstance(k, str) and k.replace("-", "_") in valid and k.replace("-", "_") not in CONFIG_TABLES:
            log.warning("config file %s: `%s` is in the [%s] table, passed to Spark as it is; as a replicator "
                        "setting it goes above the first [table]", path, _toml_key([table, k]), table)


def _first_key(key: str, value: Any) -> list[str]:
    """The path to the first key under `key` that holds no table (or an empty one)."""
    keys = [key]
    while isinstance(value, dict) and value:
        key, value = next(iter(value.items()))
        keys.append(str(key))
    return keys


def _hint(keys: Sequence[str], valid: Collection[str]) -> str:
    """What to write instead: the closest setting, in the spelling of the user's key ('-' or '_')."""
    leaf = keys[-1]
    candidates = sorted(set(valid) - CONFIG_TABLES)

    def spelled(name: str) -> str:
        return name.replace("_", "-") if "-" in leaf and "_" not in leaf else name

    tables = ", ".join(f"[{t}]" for t in sorted(CONFIG_TABLES))
    leaf_name = leaf.replace("-", "_")
    closest = difflib.get_close_matches(leaf_name, candidates, n=1)
    if len(keys) == 1:
        if closest:
            return f"did you mean `{spelled(closest[0])}`?"
        return "no setting has a similar name; the keys are the long flag names, see replicator/cli/settings.py"
    if leaf_name in valid:
        return f"keys go at the top level: `{spelled(leaf_name)}`; the only table is {tables}"
    head = keys[0].replace("-", "_")
    if head in valid:
        return f"`{head}` is a setting, not a table: `{keys[0]} = ...` at the top level"
    if closest:
        return f"keys go at the top level; the closest setting is `{spelled(closest[0])}`"
    return f"keys go at the top level; the only table is {tables}"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_key(keys: Sequence[str]) -> str:
    """A key path as TOML writes it: bare parts dotted, others quoted (spark."spark.sql.x")."""
    return ".".join(k if _BARE_KEY.match(k) else json.dumps(k) for k in keys)


class ConfigFileSource(PydanticBaseSettingsSource):
    """The lowest layer: `--config FILE` (or REPLICATOR_CONFIG). An unknown key is a ConfigError."""

    def __init__(self, settings_cls: type[BaseSettings], path: str | None) -> None:
        super().__init__(settings_cls)
        self.path = path
        self.data = read_config_file(path, settings_cls.model_fields) if path else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k in self.settings_cls.model_fields}


def load_settings(flags: Mapping[str, Any], *, config: str | None = None) -> ReplicatorSettings:
    """Resolve the settings for one command line (flags not given are None and do not count).

    A value of the wrong shape is a ConfigError naming where it came from (the flag, the
    environment variable or the config key), so the user knows what to fix.
    """
    warn_unknown_environment()
    given = {k: v for k, v in flags.items() if v is not None and k in ReplicatorSettings.model_fields}
    kwargs: dict[str, Any] = dict(given)
    if config:
        kwargs["config"] = config
    try:
        return ReplicatorSettings(**kwargs)
    except ValidationError as exc:
        raise _config_error(exc, given, config) from None


_WARNED: set[str] = set()  # the unknown variables already warned about (once per process)


def env_names() -> frozenset[str]:
    """Every REPLICATOR_ variable the code base reads: the settings' and OTHER_ENV_VARS."""
    return frozenset(env_name(n) for n in ReplicatorSettings.model_fields) | frozenset(OTHER_ENV_VARS)


def warn_unknown_environment(environ: Mapping[str, str] | None = None) -> None:
    """A WARNING (logger "replicator", stderr) for each REPLICATOR_ variable nobody reads, with the
    closest known name; not an error, since the environment is shared. Once per variable."""
    known = env_names()
    for var in sorted(os.environ if environ is None else environ):
        upper = var.upper()  # pydantic-settings reads the environment case-insensitively
        if not upper.startswith(ENV_PREFIX) or upper in known or upper in _WARNED:
            continue
        _WARNED.add(upper)
        closest = difflib.get_close_matches(upper, sorted(known), n=1)
        hint = f" (did you mean {closest[0]}?)" if closest else ""
        log.warning("%s is not a replicator setting%s", var, hint)


def _config_error(exc: ValidationError, given: Mapping[str, Any], config: str | None) -> ConfigError:
    err = exc.errors()[0]
    name = str(err["loc"][0]) if err["loc"] else "?"
    if name in given:
        origin = flag_name(name)
    elif any(k.upper() == env_name(name) for k in os.environ):
        origin = env_name(name)
    else:
        key = _toml_key([str(p) for p in err["loc"]]) or "?"
        origin = f"`{key}` in config file {config or os.environ.get(CONFIG_ENV)}"
    shown = "" if name in SECRETS else f" (got {err.get('input')!r})"
    return ConfigError(f"{origin}: {err['msg'].removeprefix('Value error, ')}{shown}")


# --- option objects of the commands whose flags are not layered ---------------------------


@dataclass(frozen=True)
class DecodeCommand:
    """`replicator decode`: one captured message (files, '-' = stdin)."""

    protocol: Literal["open", "craft", "canal-json", "simple"]
    value: str
    key: str | None = None
    timezone: str = "UTC"
    legacy: Literal["auto", "legacy", "modern"] = "auto"
    compression: Literal["none", "lz4", "snappy"] = "none"
    schema: tuple[str, ...] = ()  # Simple: BOOTSTRAP / DDL message files read first, for their schemas


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
    from_ts: int | None = None  # a storage sink: re-apply from this commit ts (TSO)


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

    protocol: Literal["open", "craft", "canal-json", "simple", "csv"]
    topic: str | None = None
    bootstrap_servers: str | None = None
    out: str | None = None
    storage_sink: str | None = None  # write the changefeed as TiCDC's storage sink (csv or canal-json)
    seed: int = 1
    events: int = 5000
    partitions: int = 3
    tables: int = 4
    expected: str | None = None
    ddl: str = "auto"
    compression: Literal["none", "lz4", "snappy"] = "none"
    claim_check_dir: str | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES


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
