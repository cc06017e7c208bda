"""TiCDC's Simple protocol (v8.0+), JSON encoding: message values <-> events.

One JSON object per Kafka message, no key (tiflow `pkg/sink/codec/simple`, docs
ticdc/ticdc-simple-protocol.md), every message with `version` 1 and a `type`:
- BOOTSTRAP: `tableSchema` (columns in column-ID order with `dataType.mysqlType`, `unsigned`,
  `nullable`; indexes with `primary` / `unique` / `nullable`), commit ts 0. No event: the schema is
  cached per run by (database, table, `version`) in `DecodeOptions.state` (`codec.state.CodecState`).
- DDL (CREATE, RENAME, CINDEX, DINDEX, ERASE, TRUNCATE, ALTER, QUERY): `sql`, `commitTs`, and the
  schemas after / before it (`tableSchema`, `preTableSchema`), which are cached too. The statement
  is classified into TiDB's 36 DDL codes (`replicator.mysql.classify`), as for canal-json. TiCDC
  broadcasts Simple's DDL to every partition.
- WATERMARK: `commitTs` -> `Resolved`.
- INSERT (`data`), UPDATE (`data` and the full old row `old`), DELETE (`old`): typed by the cached
  schema named by (`database`, `table`, `schemaVersion`). A DML whose schema this run has not read
  raises `SchemaNotArrivedError` (a `DecodeError`): its types are never guessed. `tableID` differing
  from the schema's is the physical partition id.
- Values: strings (integers, floats in Go's 'f' format, DECIMAL, dates, JSON), ENUM / SET / BIT as
  their number, binary (a `blob` / `binary` type) as base64, TIMESTAMP as `{location, value}`.
- `checksum` {version, corrupted, current, previous}: the CRC32 of the new / old row
  (`codec.checksum`), verified when non-zero; a mismatch or `corrupted` raises `ChecksumError`.
- Large messages (codec/large.py): with `DecodeOptions.compression` every value is decompressed
  first; a `claimCheckLocation` row (TiCDC also sets `handleKeyOnly` on it) decodes to a reference
  the engine resolves from the claim-check file, its checksum (the full row's) left to the file's
  row; a `handleKeyOnly` row without one decodes with its mark, and the engine refuses it.
Not supported: the Avro encoding.
"""

from __future__ import annotations

from replicator.codec.simple.decoder import SchemaNotArrivedError, decode, restore_schemas
from replicator.codec.simple.encoder import (
    encode_bootstrap,
    encode_ddl,
    encode_resolved,
    encode_row,
    encode_rows,
    table_schema,
)

__all__ = ["SchemaNotArrivedError", "decode", "encode_bootstrap", "encode_ddl", "encode_resolved", "encode_row",
           "encode_rows", "restore_schemas", "table_schema"]
