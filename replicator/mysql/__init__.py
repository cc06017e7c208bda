"""Upstream MySQL (TiDB dialect) DDL text read into facts: one tokenizer, no Spark, nothing executed.

Below the codecs, the engine, the simulator and the Delta side, which all read DDL text:
- `tokens`: the one tokenizer and its cursor, `sanitize` (TiDB-only words sqlglot rejects),
  backtick quoting;
- `classify`: a statement's TiDB DDL type code, for formats that carry none (canal-json, Simple);
- `statements`: RENAME TABLE pairs, RECOVER / FLASHBACK TABLE, `ADD COLUMN (a int, b int)`;
- `partitions`: the partition model from `PARTITION BY` and `ALTER TABLE .. PARTITION`.
Full statements (CREATE TABLE, ALTER TABLE) are parsed by sqlglot's MySQL dialect
(`delta/typemap.py`); these hand readers cover what it cannot read or reads loosely. What the Delta
side makes of the facts (Spark predicates, literals, type widening) lives in `delta/ddl/`.
"""
