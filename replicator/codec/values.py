"""Text <-> Python value conversions shared by every codec.

TiCDC sends DATE/DATETIME/TIMESTAMP/TIME/DECIMAL/JSON as text in both Open Protocol and Craft;
parsing them here once keeps the two codecs' value typing identical.

Choices (documented in docs/types.md):
- DATETIME -> naive `datetime`; TIMESTAMP -> aware `datetime` in the upstream time zone (default UTC).
- TIME -> `str`, its TiDB text validated against the TiDB range -838:59:59..838:59:59
  (a str keeps the fractional-second precision exactly as upstream wrote it).
- Zero dates ('0000-00-00', month/day 0) are not representable as Python dates: they raise
  DecodeError unless `zero_dates="null"` is configured (never guessed silently).
- Non-binary text (CHAR/VARCHAR/TEXT without the binary flag) whose bytes are not UTF-8 decodes
  with U+FFFD for each bad sequence (`decode_text`), in both codecs alike; one bad byte does not
  make the message undecodable. Each such value is reported to `DecodeOptions.invalid_text`.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Literal, get_args

from replicator.codec.state import CodecState
from replicator.errors import ConfigError, DecodeError
from replicator.events import Position

log = logging.getLogger("replicator")

ZeroDates = Literal["error", "null"]
# Open Protocol only: how to read CHAR/VARCHAR values of columns without an `f` field
# (pre-v4.0.6 producers base64-encoded them). Craft ignores it.
LegacyMode = Literal["auto", "legacy", "modern"]


class InvalidText:
    """Counts text values that were not UTF-8 and were decoded with U+FFFD, per table and column.

    The decoders stay pure: they report each replaced value of a message here only once the whole
    message has decoded. The first value of a table and column is logged as a warning (naming
    table, column and Kafka position); later ones are only counted, so a bad column cannot flood
    the log. The engine shows `total` in its run summary.
    """

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}
        """(schema, table, column) -> values replaced."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, schema: str, table: str, column: str, position: Position | None = None) -> None:
        key = (schema, table, column)
        seen = self.counts.get(key, 0)
        self.counts[key] = seen + 1
        if not seen:
            at = f" (first at {position})" if position is not None else ""
            log.warning(
                "%s.%s column %r: a text value is not valid UTF-8%s; its bad bytes were replaced with U+FFFD. "
                "Later ones in this column are counted in the run summary (invalid_utf8), not logged; "
                "declare the column binary upstream if it holds bytes",
                schema,
                table,
                column,
                at,
            )


def decode_text(raw: bytes) -> tuple[str, bool]:
    """Non-binary text bytes -> (str, whether invalid UTF-8 was replaced with U+FFFD).

    The one decoding both codecs use, so the same bytes give the same value whichever carried them
    (Open Protocol's TEXT as base64, Craft's CHAR/VARCHAR/TEXT as raw bytes).
    """
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """Decoder knobs shared by both codecs, so one configuration types values identically.

    `timezone`: upstream zone TIMESTAMP text is written in. `legacy`: see `LegacyMode`.
    `zero_dates`: what a zero DATE/DATETIME becomes (see module docstring). `invalid_text`: where
    text values decoded with U+FFFD are reported (None: not reported; the value decodes the same).
    `compression`: how TiCDC compressed message values (`large-message-handle-compression`).
    `state`: the run's `CodecState` (Simple's schema cache, checksum counts); None: a fresh one per
    message, so a Simple DML decodes only after its BOOTSTRAP / DDL in the same run.
    """

    timezone: dt.tzinfo = dt.UTC
    legacy: LegacyMode = "auto"
    zero_dates: ZeroDates = "error"
    invalid_text: InvalidText | None = field(default=None, compare=False, repr=False)
    # TiCDC's large-message-handle-compression: every row / DDL value is compressed (codec/large.py)
    compression: str = "none"
    state: CodecState | None = field(default=None, compare=False, repr=False)
    # (schema, table, commit ts, position) -> True: a row to leave undecoded (another shard's table,
    # `--shard`; the callable counts it). Where the wire names a row's table before its columns
    # (the Open Protocol's key), the columns are then never parsed.
    skip_row: Callable[[str, str, int, Position | None], bool] | None = field(default=None, compare=False,
                                                                                repr=False)

    def __post_init__(self) -> None:
        if self.compression not in ("none", "lz4", "snappy"):
            raise ConfigError(f"compression must be one of none, lz4, snappy, not {self.compression!r}")
        if self.legacy not in get_args(LegacyMode):
            raise ConfigError(f"legacy must be one of {get_args(LegacyMode)}, not {self.legacy!r}")
        if self.zero_dates not in get_args(ZeroDates):
            raise ConfigError(f"zero_dates must be one of {get_args(ZeroDates)}, not {self.zero_dates!r}")
        if not isinstance(self.timezone, dt.tzinfo):
            raise ConfigError(f"timezone must be a datetime.tzinfo, not {self.timezone!r}")


DEFAULT_DECODE_OPTIONS = DecodeOptions()

# re.ASCII: `\d` must not match non-ASCII digits; `\Z` (not `$`): no trailing newline accepted.
# MySQL's relaxed date format: '-', '/' or '.' between date parts (TiCDC writes '-'; the
# reference's own test data, e.g. Craft "case 0", carries '2021/01/01 00:00:00').
_DATE_RE = re.compile(r"^(\d{4})([-/.])(\d{2})\2(\d{2})\Z", re.ASCII)
_DATETIME_RE = re.compile(r"^(\d{4})([-/.])(\d{2})\2(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\Z", re.ASCII)
_TIME_RE = re.compile(r"^(-)?(\d{1,3}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\Z", re.ASCII)
_DECIMAL_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z", re.ASCII)


def _zero(text: str, what: str, zero_dates: ZeroDates) -> None:
    if zero_dates == "null":
        return None
    raise DecodeError(f"zero {what} {text!r} has no Python/Delta representation (set zero_dates='null' to map to NULL)")


def parse_date(text: str, zero_dates: ZeroDates = "error") -> dt.date | None:
    m = _DATE_RE.match(text)
    if not m:
        raise DecodeError(f"invalid DATE value {text!r}")
    y, mo, d = int(m.group(1)), int(m.group(3)), int(m.group(4))
    if mo == 0 or d == 0 or y == 0:
        _zero(text, "date", zero_dates)
        return None
    try:
        return dt.date(y, mo, d)
    except ValueError as exc:
        raise DecodeError(f"invalid DATE value {text!r}: {exc}") from None


def _parse_dt(text: str, zero_dates: ZeroDates) -> dt.datetime | None:
    m = _DATETIME_RE.match(text)
    if not m:
        raise DecodeError(f"invalid DATETIME/TIMESTAMP value {text!r}")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in (1, 3, 4, 5, 6, 7))
    frac = m.group(8)
    us = int(frac.ljust(6, "0")) if frac else 0
    if mo == 0 or d == 0 or y == 0:
        _zero(text, "datetime", zero_dates)
        return None
    try:
        return dt.datetime(y, mo, d, h, mi, s, us)
    except ValueError as exc:
        raise DecodeError(f"invalid DATETIME/TIMESTAMP value {text!r}: {exc}") from None


def parse_datetime(text: str, zero_dates: ZeroDates = "error") -> dt.datetime | None:
    """DATETIME: a wall-clock time without zone -> naive datetime."""
    return _parse_dt(text, zero_dates)


def parse_timestamp(text: str, tz: dt.tzinfo = dt.UTC, zero_dates: ZeroDates = "error") -> dt.datetime | None:
    """TIMESTAMP: TiCDC writes it in the upstream time zone -> aware datetime in `tz`."""
    value = _parse_dt(text, zero_dates)
    return None if value is None else value.replace(tzinfo=tz)


def parse_time(text: str) -> str:
    """TIME: validated and kept as text (TiDB range -838:59:59.000000 .. 838:59:59.000000)."""
    m = _TIME_RE.match(text)
    if not m:
        raise DecodeError(f"invalid TIME value {text!r}")
    h, mi, s = int(m.group(2)), int(m.group(3)), int(m.group(4))
    frac = m.group(5) or ""
    if mi > 59 or s > 59 or h > 838 or (h == 838 and (mi, s) == (59, 59) and frac.strip("0")):
        raise DecodeError(f"TIME value {text!r} outside TiDB range -838:59:59..838:59:59")
    return text


def parse_decimal(text: str) -> Decimal:
    if not _DECIMAL_RE.match(text):
        raise DecodeError(f"invalid DECIMAL value {text!r}")
    try:
        return Decimal(text)
    except InvalidOperation:
        raise DecodeError(f"invalid DECIMAL value {text!r}") from None


# MySQL DECIMAL: at most 65 digits, scale at most 30. Anything far outside is hostile input.
_DECIMAL_MAX_EXPONENT = 100


def parse_sql_decimal(text: str) -> Decimal:
    """`parse_decimal` plus a magnitude bound, for wire values.

    Exponent text like '1e999999999' is a valid Decimal, but rendering it in plain notation
    (`format_decimal`) would allocate a billion characters; no MySQL DECIMAL comes close.
    """
    value = parse_decimal(text)
    exponent = value.as_tuple().exponent  # an int: parse_decimal admits finite values only
    if not isinstance(exponent, int) or not (
        exponent >= -_DECIMAL_MAX_EXPONENT and value.adjusted() <= _DECIMAL_MAX_EXPONENT
    ):
        raise DecodeError(f"DECIMAL value {text[:40]!r} is out of the MySQL DECIMAL range")
    return value


def format_date(value: dt.date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def format_datetime(value: dt.datetime, tz: dt.tzinfo | None = None) -> str:
    """TiDB text of a DATETIME/TIMESTAMP; aware values are converted to `tz` (the upstream zone) first.

    Fractional seconds are written with trailing zeros removed (TiDB writes the column's fsp;
    the value is the same either way).
    """
    if value.tzinfo is not None and tz is not None:
        value = value.astimezone(tz)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def format_decimal(value: Decimal) -> str:
    """Plain (non-exponent) text as TiDB writes decimals."""
    return format(value, "f")
