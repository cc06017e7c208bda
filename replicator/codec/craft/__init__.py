"""TiCDC Craft binary codec: decoder and byte-exact encoder.

The layout is the one the reference Go code writes (tiflow `pkg/sink/codec/craft`), not the seed's
draft: version uvarint, columnar headers, bodies, a term dictionary for schema/table/column
names, delta-zigzag size tables and a trailing reversed uvarint giving the size-tables length.
The Kafka key of a Craft message is empty; only the value is decoded.

`decoder` reads a message (hardened against hostile input), `encoder` writes one, `wire` holds
the primitive readers, `common` the constants both directions share. Value typing is the one
shared with the Open Protocol codec (via `values`): the same upstream value decodes to the same
Python value in both protocols.
"""

from __future__ import annotations

from replicator.codec.craft.common import VERSION
from replicator.codec.craft.decoder import CraftOptions, decode
from replicator.codec.craft.encoder import encode, encode_ddl, encode_resolved, encode_rows
from replicator.codec.limits import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "VERSION",
    "CraftOptions",
    "decode",
    "encode",
    "encode_ddl",
    "encode_resolved",
    "encode_rows",
]
