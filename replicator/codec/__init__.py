"""Wire formats behind one interface.

One package per format (`open_protocol`, `craft`), each split into `decoder` and `encoder`; `values`
holds the value typing both share, so the same upstream value decodes to the same Python value in
both; `limits` the batching defaults both encoders share.
Every caller (engine, capture, simulator, benchmarks, tests) goes through `codec_for(name)`, so no
caller knows which format it speaks: a message is a Kafka (key, value) pair, and a Craft key is
`None` (the format carries everything in the value).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from replicator.codec import craft, open_protocol
from replicator.codec.limits import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.values import DecodeOptions
from replicator.errors import ConfigError
from replicator.events import DdlEvent, Event, Position, Resolved, RowChange

Message = tuple[bytes | None, bytes]
"""A Kafka message as a codec sees it: (key, value)."""


class Codec(Protocol):
    """Decode a Kafka message into events; encode one partition's events into Kafka messages."""

    name: str

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


CODECS: Final[dict[str, Codec]] = {"open": _OpenProtocol(), "craft": _Craft()}
"""The registry: protocol name (as in `--protocol`) -> codec."""

PROTOCOLS: Final = tuple(CODECS)


def codec_for(protocol: str) -> Codec:
    """The codec for a protocol name; a `ConfigError` naming the known ones otherwise."""
    try:
        return CODECS[protocol]
    except KeyError:
        raise ConfigError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}") from None
