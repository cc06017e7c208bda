"""TiCDC canal-json with the TiDB extension (`enable-tidb-extension=true`): message values <-> events.

One JSON object per Kafka message, no key (tiflow `pkg/sink/codec/canal`):
- DML: `type` INSERT / UPDATE / DELETE, `data` the new image (a DELETE's old one), `old` an
  UPDATE's old image: every column (TiCDC's default) or only the changed ones
  (`only-output-updated-columns`; the others are taken from `data`). A DELETE may carry only the
  handle-key columns (`delete-only-output-handle-key-columns`). `_tidb.commitTs` is the commit ts.
- WATERMARK: `type` TIDB_WATERMARK, `_tidb.watermarkTs` -> `Resolved`.
- DDL: `isDdl` true, `sql` the statement. canal-json carries no TiDB DDL type code: the statement is
  classified into the same 36-code table (`replicator.mysql.classify`) and checked against canal's
  `type`; unclassifiable DDL is a `DecodeError`. TiCDC sends DDL to partition 0 only (the other
  protocols broadcast it): the codec says so (`broadcasts_ddl`), and the simulator follows.
- Large messages (codec/large.py): with `DecodeOptions.compression` every value is decompressed
  first; `_tidb.claimCheckLocation` marks a reference (the row's handle-key columns only) the
  engine resolves from the claim-check file, `_tidb.onlyHandleKey` a handle-key-only row it refuses.
- A message without `_tidb` (extension off) is a `DecodeError` saying to enable the extension:
  without commit ts and watermarks exactly-once replication is impossible.

Typing (`mysqlType`, `sqlType`, `pkNames` -> the type code and flags the other protocols carry):
`mysqlType`'s base name gives the code (`varbinary`, `binary`, `*blob` are binary strings, as is a
textual column whose `sqlType` is BLOB/BINARY/VARBINARY/LONGVARBINARY); ` unsigned` the unsigned
flag (YEAR is always unsigned, BIT never, as in TiDB); `pkNames` the handle-key and primary-key
flags; numbers, temporal types, BIT and JSON get the binary flag TiDB gives them. Not carried: the
nullable / unique / multiple-key / generated flags, the row id and the physical partition id. Values
are canal's strings: integers (BIGINT UNSIGNED to 2^64-1), BIT/SET as their number, ENUM as its index,
FLOAT/DOUBLE in Go's 'f' format (`-0` keeps its sign), DECIMAL exact, DATE/DATETIME/TIMESTAMP/TIME
through `values` (the same typing as the other codecs), binary bytes as ISO-8859-1 characters.

A table without a primary key but with a unique NOT NULL key (TiCDC's fallback handle key) has
empty `pkNames`: its merge key comes from its CREATE TABLE in the stream.
"""

from __future__ import annotations

from replicator.codec.canal_json.decoder import NO_EXTENSION, decode
from replicator.codec.canal_json.encoder import encode_ddl, encode_resolved, encode_row, encode_rows

__all__ = ["NO_EXTENSION", "decode", "encode_ddl", "encode_resolved", "encode_row", "encode_rows"]
