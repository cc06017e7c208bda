"""TiCDC large-message handling, the pure part: value compression and claim-check envelopes.

Facts from TiCDC (tiflow `pkg/compression/compress.go`, `pkg/sink/kafka/claimcheck/claim_check.go`,
`pkg/sink/codec/common/message.go`, the open-protocol encoder):
- `large-message-handle-compression = none|lz4|snappy` compresses EVERY message's value entries,
  not only the large ones. lz4 is the LZ4 *frame* format (pierrec/lz4 `NewWriter`), snappy the
  raw snappy *block* format (klauspost/compress/snappy `Encode`, not the framed stream format).
  Keys are never compressed. In the Open Protocol each row / DDL value entry is compressed on its
  own inside the batch framing; a resolved event's value entry is empty and stays empty.
- `claim-check`: a message too large for Kafka is written to `<claim-check-storage-uri>/<uuid>.json`
  as JSON `{"key": <base64>, "value": <base64>}` (Go's `[]byte` in JSON: standard base64 with
  padding, `null` for nil) holding the whole original Kafka message (its value still compressed);
  Kafka gets a reference instead: in the Open Protocol a key with `"ccl": "<storage uri>/<uuid>.json"`
  and a value with only the handle-key columns. The reference decoder reads the file by its base
  name from its own configured storage, which is what `claim_check_name` gives.
  (`claim-check-raw-value`, the bare value as the file, is refused with open-protocol upstream.)
- `handle-key-only`: the key says `"ohk": true` and the value holds only the handle-key columns;
  the full row needs a snapshot read of the upstream TiDB.

canal-json and Simple (one event per message, no key) do the same with the whole message value:
every value (rows, DDL, watermarks, Simple's BOOTSTRAP) is compressed; a row whose compressed value
is too large is stored as the claim-check file `{"key": null, "value": <that value>}` and Kafka gets
the row with only its handle-key columns plus canal-json's `_tidb.claimCheckLocation` / Simple's
`claimCheckLocation` (Simple also sets `handleKeyOnly`): `one_message_value` is that step for both.

Everything here is pure: bytes in, bytes out, `DecodeError` for anything malformed. Reading the
file is the caller's (replicator/sources/claimcheck.py).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Final, Literal, get_args

import cramjam

from replicator.codec.limits import MAX_RECORD_OVERHEAD, MessageTooLargeError
from replicator.errors import ConfigError, DecodeError
from replicator.events import Column, Flag, RowChange

Compression = Literal["none", "lz4", "snappy"]
COMPRESSIONS: Final[tuple[str, ...]] = get_args(Compression)

HANDLE_KEY_ONLY_REMEDY: Final = (
    "the message holds only the row's handle-key columns (TiCDC large-message-handle-option="
    "handle-key-only); the full row needs a snapshot read of the upstream TiDB, which the replicator "
    "does not do, so the row is not applied: set large-message-handle-option=claim-check (with "
    "claim-check-storage-uri) in the changefeed and run with --claim-check-storage, or raise "
    "max-message-bytes"
)


def check_compression(name: str) -> Compression:
    if name not in COMPRESSIONS:
        raise ConfigError(f"unknown compression {name!r}: use one of {', '.join(COMPRESSIONS)}")
    return name  # type: ignore[return-value]


def compress(compression: str, data: bytes) -> bytes:
    """As TiCDC's `compression.Encode`: lz4 frame, snappy block, or the bytes as they are."""
    if compression == "none":
        return data
    if compression == "lz4":
        return bytes(cramjam.lz4.compress(data))
    if compression == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    raise ConfigError(f"unknown compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")


def decompress(compression: str, data: bytes) -> bytes:
    """As TiCDC's `compression.Decode`; `DecodeError` when `data` is not in that format."""
    if compression == "none":
        return data
    try:
        if compression == "lz4":
            return bytes(cramjam.lz4.decompress(data))
        if compression == "snappy":
            return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:  # cramjam raises its own DecompressionError (and ValueError on odd input)
        raise DecodeError(
            f"value is not {compression}-compressed ({exc}); is --compression the changefeed's "
            "large-message-handle-compression?"
        ) from None
    raise ConfigError(f"unknown compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")


def decompress_value(compression: str, data: bytes) -> bytes:
    """A whole message value (canal-json, Simple) decompressed; `DecodeError` at field 'value'. An
    empty result is an error too: TiCDC never compresses an empty value."""
    try:
        plain = decompress(compression, data)
    except DecodeError as exc:
        raise DecodeError(exc.what, offset=0, where="value") from None
    if not plain:
        raise DecodeError(f"{compression}-compressed value holds no bytes, not a JSON object", offset=0,
                          where="value")
    return plain


def claim_check_name(location: str) -> str:
    """The file name of a claim-check location (`s3://b/p/<uuid>.json` -> `<uuid>.json`): the
    reference decoder reads that name from its own storage. `DecodeError` when it has none or could
    leave the storage directory."""
    name = location.rstrip().rsplit("/", 1)[-1]
    if not name or name in (".", "..") or "\\" in name or "\x00" in name:
        raise DecodeError(f"claim-check location {location!r} names no file", where="field 'ccl'")
    return name


def _b64(value: object, field: str) -> bytes:
    if value is None:
        return b""  # Go marshals a nil []byte as null
    if not isinstance(value, str):
        raise DecodeError(f"claim-check file field {field!r} is not a base64 string", where=f"field {field!r}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise DecodeError(f"claim-check file field {field!r} is not valid base64", where=f"field {field!r}") from None


def parse_claim_check(data: bytes) -> tuple[bytes, bytes]:
    """A claim-check file's content -> the original Kafka message (key, value)."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise DecodeError(f"claim-check file is not JSON ({exc})") from None
    if not isinstance(obj, dict) or "value" not in obj:
        raise DecodeError('claim-check file is not a {"key": ..., "value": ...} object')
    return _b64(obj.get("key"), "key"), _b64(obj["value"], "value")


def claim_check_envelope(key: bytes | None, value: bytes) -> bytes:
    """The claim-check file TiCDC writes for the message (key, value) (Go json.Marshal of
    `ClaimCheckMessage`; canal-json's and Simple's nil key is `null`)."""
    k = "null" if key is None else '"' + base64.b64encode(key).decode("ascii") + '"'
    v = base64.b64encode(value).decode("ascii")
    return f'{{"key":{k},"value":"{v}"}}'.encode("ascii")


ClaimCheckWriter = Callable[[bytes | None, bytes], str]
"""Stores one message (key, value) as a claim-check file and returns its location (an encoder's
`claim_check` argument: the simulator's and the tests' stand-in for TiCDC's storage)."""


def handle_key_columns(columns: Sequence[Column]) -> tuple[Column, ...]:
    """The handle-key columns of a row image: what a large-message reference carries."""
    handle = tuple(c for c in columns if c.flags & Flag.HANDLE_KEY)
    if columns and not handle:
        raise ValueError("a large-message reference needs handle-key columns")
    return handle


def one_message_value(
    row: RowChange,
    encode: Callable[[RowChange], bytes],
    *,
    compression: str = "none",
    max_message_bytes: int,
    claim_check: ClaimCheckWriter | None = None,
    reference_is_key_only: bool = False,
) -> bytes:
    """The Kafka value for `row` in a one-event-per-message format (canal-json, Simple), as TiCDC's
    encoder makes it: `encode(row)` compressed; when that is too large for `max_message_bytes` and a
    `claim_check` writer is given, the value goes to a claim-check file (key null) and the result is
    the reference, `encode` of the row with only its handle-key columns and `claim_check` set
    (`only_handle_key` too where the format marks it: Simple). `MessageTooLargeError` when even
    that does not fit, as the reference does."""
    value = compress(compression, encode(row))
    if len(value) + MAX_RECORD_OVERHEAD > max_message_bytes and claim_check is not None:
        location = claim_check(None, value)
        ref = dataclasses.replace(row, claim_check=location, only_handle_key=reference_is_key_only,
                                  columns=handle_key_columns(row.columns),
                                  old_columns=handle_key_columns(row.old_columns))
        value = compress(compression, encode(ref))
    if len(value) + MAX_RECORD_OVERHEAD > max_message_bytes:
        raise MessageTooLargeError(
            f"row of {row.schema}.{row.table} at ts {row.commit_ts} encodes to {len(value)} bytes, "
            f"more than max-message-bytes {max_message_bytes} allows")
    return value
