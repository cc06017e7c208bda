"""Wire formats behind one interface.

One package per format (`open_protocol`, `craft`, `canal_json`, `simple`), each split into `decoder` and
`encoder`; `values` holds the value typing they share, so the same upstream value decodes to the same
Python value in all; `limits` the batching defaults the encoders share.
Every caller (engine, capture, simulator, benchmarks, tests) goes through `codec_for(name)`, so no
caller knows which format it speaks: a message is a Kafka (key, value) pair, and a Craft or
canal-json key is `None` (the format carries everything in the value). What differs between formats
beyond the bytes is said by attributes: `broadcasts_ddl` (False for canal-json: TiCDC sends its DDL to
partition 0 only). Simple is stateful: its rows are typed by schemas from earlier BOOTSTRAP / DDL
messages, kept in the run's `DecodeOptions.state`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from replicator.codec import canal_json, craft, open_protocol, simple
from replicator.codec.large import ClaimCheckWriter
from replicator.codec.limits import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.values import DecodeOptions
from replicator.errors import ConfigError
from replicator.events import DdlEvent, Event, Position, Resolved, RowChange

Message = tuple[bytes | None, bytes]
"""A Kafka message as a codec sees it: (key, value)."""


class Codec(Protocol):
    """Decode a Kafka message into events; encode one partition's events into Kafka messages."""

    name: str
    broadcasts_ddl: bool
    """True: TiCDC writes each DDL to every partition of the topic; False: to partition 0 only."""

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        """Events of one message in wire order; `DecodeError` (at `position`) when malformed.

        Pure: text that was not UTF-8 (decoded with U+FFFD) is reported to `options.invalid_text`.
        """
        ...

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        """Row events of ONE partition -> messages, batched as the reference encoder does; with
        TiCDC's large-message handling (codec/large.py) when `compression` / `claim_check` are given."""
        ...

    def encode_event(self, event: DdlEvent | Resolved, *, compression: str = "none") -> Message:
        """A DDL or resolved event -> its own message (the reference never batches them)."""
        ...

    def encode(
        self,
        events: Iterable[Event],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        """One partition's events in order -> messages: rows batched, DDL and resolved alone."""
        ...


class _Codec:
    """What both formats share: `encode` = runs of rows through `encode_rows`, each DDL / resolved
    event alone through `encode_event`, in order (the reference encoders' batching)."""

    name = ""
    broadcasts_ddl = True

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        raise NotImplementedError

    def encode_event(self, event: DdlEvent | Resolved, *, compression: str = "none") -> Message:
        raise NotImplementedError

    def encode(
        self,
        events: Iterable[Event],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        out: list[Message] = []
        rows: list[RowChange] = []
        for event in [*events, None]:
            if isinstance(event, RowChange):
                rows.append(event)
                continue
            if rows:
                out += self.encode_rows(
                    rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone,
                    compression=compression, claim_check=claim_check)
                rows = []
            if event is not None:
                out.append(self.encode_event(event, compression=compression))
        return out


class _OpenProtocol(_Codec):
    name = "open"

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        return open_protocol.decode(key, value, options=options, position=position)

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        return list(open_protocol.encode_rows(
            rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone,
            compression=compression, claim_check=claim_check))

    def encode_event(self, event: DdlEvent | Resolved, *, compression: str = "none") -> Message:
        if isinstance(event, DdlEvent):
            return open_protocol.encode_ddl(event, compression=compression)
        return open_protocol.encode_resolved(event)  # its value entry is empty: nothing to compress


class _Craft(_Codec):
    name = "craft"

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        return craft.decode(value if value is not None else b"", options=options, position=position)

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        _no_large_messages(compression, claim_check)
        values = craft.encode_rows(
            rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone)
        return [(None, v) for v in values]

    def encode_event(self, event: DdlEvent | Resolved, *, compression: str = "none") -> Message:
        _no_large_messages(compression, None)
        return None, craft.encode_ddl(event) if isinstance(event, DdlEvent) else craft.encode_resolved(event)


def _no_large_messages(compression: str, claim_check: ClaimCheckWriter | None) -> None:
    if compression != "none" or claim_check is not None:
        raise ConfigError("TiCDC has no large-message handling (compression, claim-check) for craft")


class _JsonFormat(Protocol):
    """The module functions of a format that writes one event per message and no key."""

    def decode(self, key: bytes | None, value: bytes | None, *, options: DecodeOptions | None = None,
               position: Position | None = None) -> list[Event]: ...

    def encode_rows(self, rows: Sequence[RowChange], *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                    timezone: dt.tzinfo = dt.UTC, compression: str = "none",
                    claim_check: ClaimCheckWriter | None = None) -> list[bytes]: ...

    def encode_ddl(self, ddl: DdlEvent, *, compression: str = "none") -> bytes: ...

    def encode_resolved(self, ts: int | Resolved, *, compression: str = "none") -> bytes: ...


class _OneEventPerMessage(_Codec):
    """canal-json and Simple: one event per message, no key; `max_batch_size` does not apply (TiCDC
    never batches them). canal-json sends DDL to partition 0 only; Simple broadcasts it, and a
    BOOTSTRAP goes before each table's rows (its rows decode with `options.state` shared across the
    run's messages)."""

    def __init__(self, name: str, fmt: _JsonFormat, *, broadcasts_ddl: bool) -> None:
        self.name = name
        self.broadcasts_ddl = broadcasts_ddl
        self._fmt = fmt

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        return self._fmt.decode(key, value, options=options, position=position)

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
        compression: str = "none",
        claim_check: ClaimCheckWriter | None = None,
    ) -> list[Message]:
        values = self._fmt.encode_rows(rows, max_message_bytes=max_message_bytes, timezone=timezone,
                                       compression=compression, claim_check=claim_check)
        return [(None, v) for v in values]

    def encode_event(self, event: DdlEvent | Resolved, *, compression: str = "none") -> Message:
        if isinstance(event, DdlEvent):
            return None, self._fmt.encode_ddl(event, compression=compression)
        return None, self._fmt.encode_resolved(event, compression=compression)


CODECS: Final[dict[str, Codec]] = {
    "open": _OpenProtocol(), "craft": _Craft(),
    "canal-json": _OneEventPerMessage("canal-json", canal_json, broadcasts_ddl=False),
    "simple": _OneEventPerMessage("simple", simple, broadcasts_ddl=True),
}
"""The registry: protocol name (as in `--protocol`) -> codec."""

PROTOCOLS: Final = tuple(CODECS)


def codec_for(protocol: str) -> Codec:
    """The codec for a protocol name; a `ConfigError` naming the known ones otherwise."""
    try:
        return CODECS[protocol]
    except KeyError:
        raise ConfigError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}") from None
