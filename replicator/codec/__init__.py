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
    ) -> list[Message]:
        """Row events of ONE partition -> messages, batched as the reference encoder does."""
        ...

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        """A DDL or resolved event -> its own message (the reference never batches them)."""
        ...

    def encode(
        self,
        events: Iterable[Event],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
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
    ) -> list[Message]:
        raise NotImplementedError

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        raise NotImplementedError

    def encode(
        self,
        events: Iterable[Event],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
    ) -> list[Message]:
        out: list[Message] = []
        rows: list[RowChange] = []
        for event in [*events, None]:
            if isinstance(event, RowChange):
                rows.append(event)
                continue
            if rows:
                out += self.encode_rows(
                    rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone
                )
                rows = []
            if event is not None:
                out.append(self.encode_event(event))
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
    ) -> list[Message]:
        return list(open_protocol.encode_rows(
            rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone))

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        return open_protocol.encode_ddl(event) if isinstance(event, DdlEvent) else open_protocol.encode_resolved(event)


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
    ) -> list[Message]:
        values = craft.encode_rows(
            rows, max_batch_size=max_batch_size, max_message_bytes=max_message_bytes, timezone=timezone)
        return [(None, v) for v in values]

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        return None, craft.encode_ddl(event) if isinstance(event, DdlEvent) else craft.encode_resolved(event)


class _CanalJson(_Codec):
    """canal-json with the TiDB extension: one event per message, no key, DDL on partition 0 only.
    `max_batch_size` does not apply (TiCDC never batches canal-json)."""

    name = "canal-json"
    broadcasts_ddl = False

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        return canal_json.decode(key, value, options=options, position=position)

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
    ) -> list[Message]:
        values = canal_json.encode_rows(rows, max_message_bytes=max_message_bytes, timezone=timezone)
        return [(None, v) for v in values]

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        if isinstance(event, DdlEvent):
            return None, canal_json.encode_ddl(event)
        return None, canal_json.encode_resolved(event)


class _Simple(_Codec):
    """Simple (JSON encoding): one event per message, no key, DDL broadcast, a BOOTSTRAP before each
    table's rows. Decoding rows needs `options.state` shared across the run's messages."""

    name = "simple"

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        options: DecodeOptions | None = None,
        position: Position | None = None,
    ) -> list[Event]:
        return simple.decode(key, value, options=options, position=position)

    def encode_rows(
        self,
        rows: Sequence[RowChange],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timezone: dt.tzinfo = dt.UTC,
    ) -> list[Message]:
        values = simple.encode_rows(rows, max_message_bytes=max_message_bytes, timezone=timezone)
        return [(None, v) for v in values]

    def encode_event(self, event: DdlEvent | Resolved) -> Message:
        if isinstance(event, DdlEvent):
            return None, simple.encode_ddl(event)
        return None, simple.encode_resolved(event)


CODECS: Final[dict[str, Codec]] = {
    "open": _OpenProtocol(), "craft": _Craft(), "canal-json": _CanalJson(), "simple": _Simple(),
}
"""The registry: protocol name (as in `--protocol`) -> codec."""

PROTOCOLS: Final = tuple(CODECS)


def codec_for(protocol: str) -> Codec:
    """The codec for a protocol name; a `ConfigError` naming the known ones otherwise."""
    try:
        return CODECS[protocol]
    except KeyError:
        raise ConfigError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}") from None
