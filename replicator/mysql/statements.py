"""Hand-parsers for statements sqlglot cannot read: `RENAME TABLE a TO b, c TO d`, `RECOVER TABLE` /
`FLASHBACK TABLE`, `ALTER TABLE .. RENAME`, `ALTER TABLE .. ADD COLUMN (a int, b int)`. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from replicator.errors import DdlError
from replicator.mysql.tokens import Cursor, alter_table_head, sanitize

Name = tuple[str | None, str]


def parse_rename_tables(query: str) -> list[tuple[Name, Name]] | None:
    """`RENAME TABLE a TO b [, c TO d ...]` as (old, new) pairs; None for another statement."""
    cur = Cursor(query)
    if not cur.accept_word("RENAME") or not cur.accept_word("TABLE", "TABLES"):
        return None
    pairs: list[tuple[Name, Name]] = []
    while True:
        old = cur.table_name()
        cur.expect_word("TO")
        pairs.append((old, cur.table_name()))
        if not cur.accept_punct(","):
            break
    cur.expect_end()
    return pairs


def parse_renames(query: str) -> list[tuple[Name, Name]]:
    """The (old, new) pairs of a TiDB "Rename Table" DDL (code 14): `RENAME TABLE a TO b[, ...]` or
    `ALTER TABLE a RENAME [TO|AS] b`, comments removed first; DdlError for any other statement."""
    query = sanitize(query)
    pairs = parse_rename_tables(query)
    if pairs is None:
        single = parse_alter_rename(query)
        if single is None:
            raise DdlError("not a RENAME TABLE / ALTER TABLE .. RENAME statement")
        pairs = [single]
    return pairs


def parse_alter_rename(query: str) -> tuple[Name, Name] | None:
    """`ALTER TABLE a RENAME [TO|AS] b` (sqlglot rejects `RENAME AS`); None for anything else."""
    cur = Cursor(query)
    head = alter_table_head(cur)
    if head is None or not cur.accept_word("RENAME"):
        return None
    cur.accept_word("TO", "AS")
    new = cur.table_name()
    cur.expect_end()
    return head, new


@dataclass(frozen=True)
class RecoverStmt:
    schema: str | None
    table: str | None  # None: RECOVER TABLE BY JOB n (the event's table names it)
    new_name: str | None = None


def parse_recover(query: str) -> RecoverStmt:
    """`RECOVER TABLE [db.]t [n]`, `RECOVER TABLE BY JOB n`, `FLASHBACK TABLE [db.]t [TO new]`."""
    cur = Cursor(query)
    if cur.accept_word("RECOVER"):
        cur.expect_word("TABLE")
        if cur.accept_word("BY"):
            cur.expect_word("JOB")
            cur.next("a job id")
            cur.expect_end()
            return RecoverStmt(None, None)
        schema, table = cur.table_name()
        tok = cur.peek()
        if tok is not None and tok.kind == "number":
            cur.next()
        cur.expect_end()
        return RecoverStmt(schema, table)
    if cur.accept_word("FLASHBACK"):
        cur.expect_word("TABLE")
        schema, table = cur.table_name()
        new = cur.name("a new table name") if cur.accept_word("TO") else None
        cur.expect_end()
        return RecoverStmt(schema, table, new)
    raise cur.fail("RECOVER TABLE or FLASHBACK TABLE")


def parse_add_column_list(query: str) -> tuple[Name, str, bool] | None:
    """`ALTER TABLE t ADD [COLUMN] [IF NOT EXISTS] (defs)`: (table, defs text, if_not_exists).

    sqlglot falls back to a Command for the parenthesized form; the definitions are then parsed
    by sqlglot as the column list of a CREATE TABLE.
    """
    cur = Cursor(query)
    head = alter_table_head(cur)
    if head is None or not cur.accept_word("ADD"):
        return None
    cur.accept_word("COLUMN")
    if_not_exists = False
    if cur.accept_word("IF"):
        cur.expect_word("NOT")
        cur.expect_word("EXISTS")
        if_not_exists = True
    open_tok = cur.peek()
    if open_tok is None or not open_tok.is_punct("("):
        return None
    cur.skip_balanced()
    close_tok = cur.toks[cur.i - 1]
    cur.expect_end()
    return head, query[open_tok.end: close_tok.start], if_not_exists
