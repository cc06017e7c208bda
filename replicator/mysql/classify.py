"""A DDL statement's TiDB DDL type code (1-36), from its text: for protocols that carry no code.

canal-json sends a DDL's SQL but not its TiDB action type, while the Delta side (`delta/ddl/rules.py`)
applies DDL by that code. `classify_ddl` reads the statement with the one tokenizer (`mysql.tokens`,
executable comments read as text; no SQL is executed, no Spark) and returns the code TiDB gives the
same statement, so every protocol reaches the one DDL path. It never guesses: a statement it
cannot place, or an `ALTER TABLE` whose clauses have different codes (TiDB's multi-schema change,
type 61, which the DDL table does not know either), raises `DecodeError` (the engine dead-letters
it like any undecodable message).

`CANAL_EVENT_TYPES` is the reverse direction TiCDC's canal encoder uses (code -> canal `type`:
CREATE, ERASE, ALTER, TRUNCATE, RENAME, CINDEX, DINDEX, QUERY): the decoder checks a classification
against the message's `type` and the encoder writes it.

Code 31 (Update TiFlash Replica Status) is a TiDB-internal job with no statement of its own: no text
classifies to it.
"""

from __future__ import annotations

from typing import Final

from replicator.errors import DdlError, DecodeError
from replicator.mysql.tokens import Cursor, Token, tokenize

__all__ = ["CANAL_EVENT_TYPES", "canal_event_type", "classify_ddl", "is_alter_table"]

_CANAL_GROUPS: Final[dict[str, tuple[int, ...]]] = {
    "CREATE": (3,),
    "ERASE": (4,),
    "TRUNCATE": (11,),
    "RENAME": (14,),
    "CINDEX": (7, 9, 32),
    "DINDEX": (8, 10, 33),
    "ALTER": (5, 6, 12, 13, 15, 17, 18, 19, 20, 22, 23),
    "QUERY": (1, 2, 16, 21, 24, 25, 26, 27, 28, 29, 30, 31, 34, 35, 36),
}
CANAL_EVENT_TYPES: Final[dict[int, str]] = {code: name for name, codes in _CANAL_GROUPS.items() for code in codes}
"""TiDB DDL type code -> the canal `type` TiCDC writes for it (tiflow `convertDdlEventType`)."""


def canal_event_type(code: int) -> str:
    """The canal `type` of a DDL code (QUERY for a code outside the table, as TiCDC does)."""
    return CANAL_EVENT_TYPES.get(code, "QUERY")


def _short(text: str, limit: int = 80) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _cursor(query: str) -> Cursor:
    """The statement's tokens, executable comments read as text; DecodeError when it cannot be read."""
    try:
        return Cursor(query, tokenize(query, executable=True))
    except DdlError as exc:
        raise DecodeError(f"DDL statement {_short(query)} cannot be read: {exc}") from None


def _upper(tok: Token | None) -> str | None:
    """A word token's text upper-cased; None for anything else."""
    return tok.text.upper() if tok is not None and tok.kind == "word" else None


def _skip_name(cur: Cursor) -> bool:
    """A possibly qualified name (`db`.`t`)."""
    tok = cur.peek()
    if tok is None or tok.kind not in ("word", "ident"):
        return False
    cur.i += 1
    if cur.at_punct("."):
        cur.i += 1
        if cur.peek() is not None:
            cur.i += 1
    return True


_CREATE_TARGETS: Final = {"DATABASE": 1, "SCHEMA": 1, "TABLE": 3, "VIEW": 21, "INDEX": 7, "SEQUENCE": 34}
_DROP_TARGETS: Final = {"DATABASE": 2, "SCHEMA": 2, "TABLE": 4, "VIEW": 24, "INDEX": 8, "SEQUENCE": 36}
_PARTITION_OPS: Final = {"DROP": 20, "TRUNCATE": 23, "ADD": 19}
_INDEX_WORDS: Final = ("INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL")
_CREATE_PREFIX: Final = frozenset(("OR", "REPLACE", "ALGORITHM", "DEFINER", "SQL", "SECURITY", "UNIQUE", "FULLTEXT",
                                   "SPATIAL", "CURRENT_USER", "UNDEFINED", "MERGE", "TEMPTABLE", "INVOKER"))


def classify_ddl(query: str) -> int:
    """The TiDB DDL type code of one DDL statement; `DecodeError` when it cannot be placed exactly."""
    code = _classify(_cursor(query))
    if code is None:
        raise DecodeError(
            f"DDL statement {_short(query)} is not one the replicator can classify into a TiDB DDL type "
            "(canal-json carries no type code); it is not applied"
        )
    if isinstance(code, str):
        raise DecodeError(f"DDL statement {_short(query)}: {code}; it is not applied")
    return code


def is_alter_table(query: str) -> bool:
    """Whether the statement is an `ALTER TABLE` (TiCDC's canal type for any multi-clause one is ALTER)."""
    try:
        cur = _cursor(query)
    except DecodeError:
        return False
    if not cur.accept_word("ALTER"):
        return False
    cur.accept_word("ONLINE", "OFFLINE")
    cur.accept_word("IGNORE")
    return cur.accept_word("TABLE")


def _classify(cur: Cursor) -> int | str | None:
    if cur.accept_word("CREATE"):
        return _create(cur)
    if cur.accept_word("DROP"):
        if cur.at_word("TEMPORARY"):
            return "temporary tables are not replicated by TiCDC"
        word = _upper(cur.peek())
        return _DROP_TARGETS.get(word) if word is not None else None
    if cur.accept_word("ALTER"):
        if cur.accept_word("DATABASE", "SCHEMA"):
            return _alter_database(cur)
        if cur.accept_word("SEQUENCE"):
            return 35
        cur.accept_word("ONLINE", "OFFLINE")
        cur.accept_word("IGNORE")
        if cur.accept_word("TABLE") and _skip_name(cur):
            return _alter_table(cur)
        return None
    if cur.accept_word("TRUNCATE"):
        cur.accept_word("TABLE")
        return 11 if _skip_name(cur) else None
    if cur.accept_word("RENAME"):
        return 14 if cur.accept_word("TABLE", "TABLES") else None
    if cur.accept_word("RECOVER"):
        return 25 if cur.accept_word("TABLE") else None
    if cur.accept_word("FLASHBACK"):
        return 25 if cur.accept_word("TABLE") else None
    if cur.accept_word("LOCK"):
        return 27 if cur.accept_word("TABLE", "TABLES") else None
    if cur.accept_word("UNLOCK"):
        return 28 if cur.accept_word("TABLE", "TABLES") else None
    if cur.accept_word("ADMIN"):
        return 29 if cur.accept_word("REPAIR") and cur.accept_word("TABLE") else None
    return None


def _create(cur: Cursor) -> int | str | None:
    """CREATE [OR REPLACE] [ALGORITHM = x] [DEFINER = u@h] [SQL SECURITY x] VIEW | [UNIQUE ..] INDEX | ..."""
    while (tok := cur.peek()) is not None:
        word = _upper(tok)
        if word in _CREATE_TARGETS:
            return _CREATE_TARGETS[word]
        if word == "TEMPORARY":
            return "temporary tables are not replicated by TiCDC"
        if tok.kind == "punct" and tok.text in "=@":
            cur.i += 2  # the value of ALGORITHM / DEFINER / SECURITY, or a host
            continue
        if tok.kind == "punct" and tok.text in "()":  # CURRENT_USER()
            cur.i += 1
            continue
        if word not in _CREATE_PREFIX:
            return None
        cur.i += 1
    return None


def _alter_database(cur: Cursor) -> int | None:
    rest = [t.text.upper() for t in cur.toks[cur.i:] if t.kind == "word"]
    if any(w in ("CHARSET", "CHARACTER", "COLLATE") for w in rest) and not any(
        w in ("PLACEMENT", "TIFLASH", "ENCRYPTION", "READ_ONLY") for w in rest
    ):
        return 26
    return None


def _clauses(cur: Cursor) -> list[list[Token]]:
    """The ALTER TABLE clauses: the rest split at commas outside parentheses."""
    out: list[list[Token]] = [[]]
    depth = 0
    for tok in cur.toks[cur.i:]:
        if tok.kind == "punct" and tok.text in "([":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]":
            depth -= 1
        elif tok.kind == "punct" and tok.text == "," and depth == 0:
            out.append([])
            continue
        out[-1].append(tok)
    return out


def _alter_table(cur: Cursor) -> int | str | None:
    # Partition clauses name several partitions after one verb (DROP PARTITION p1, p2): whole statement.
    first = _upper(cur.peek())
    if first in _PARTITION_OPS and cur.at_word("PARTITION", k=1):
        return _PARTITION_OPS[first]
    clauses = _clauses(cur)
    codes: list[int] = []
    for clause in clauses:
        code = _alter_clause(Cursor("", clause))
        if code is None or isinstance(code, str):
            return code
        codes.append(code)
    if len(set(codes)) > 1:
        return (f"its clauses have different DDL types {sorted(set(codes))} (a TiDB multi-schema change, "
                "type 61, which the DDL table does not know): split it into one statement per change upstream")
    return codes[0] if codes else None


def _alter_clause(cur: Cursor) -> int | str | None:
    if cur.accept_word("ADD"):
        return _add(cur)
    if cur.accept_word("DROP"):
        if cur.accept_word("PRIMARY"):
            return 33 if cur.accept_word("KEY") else None
        if cur.accept_word("FOREIGN"):
            return 10 if cur.accept_word("KEY") else None
        if cur.at_word("INDEX", "KEY"):
            return 8
        if cur.at_word("PARTITION"):
            return 20
        if cur.at_word("CHECK", "CONSTRAINT"):
            return None
        if cur.accept_word("COLUMN") or cur.peek() is not None:
            return 6
        return None
    if cur.accept_word("MODIFY", "CHANGE"):
        return 12
    if cur.accept_word("RENAME"):
        if cur.at_word("COLUMN"):
            return 12
        if cur.at_word("INDEX", "KEY"):
            return 18
        return 14 if cur.peek() is not None else None
    if cur.accept_word("ALTER"):
        if cur.at_word("INDEX", "CHECK", "CONSTRAINT"):
            return None
        cur.accept_word("COLUMN")
        if not _skip_name(cur):
            return None
        if (cur.accept_word("SET") and cur.at_word("DEFAULT")) or (cur.accept_word("DROP") and cur.at_word("DEFAULT")):
            return 15
        return None
    if cur.accept_word("TRUNCATE"):
        return 23 if cur.at_word("PARTITION") else None
    if cur.accept_word("CONVERT"):
        return 22 if cur.at_word("TO") else None
    if cur.accept_word("SET"):
        return 30 if cur.at_word("TIFLASH") else None
    return _table_options(cur)


_OPTION_CODES: Final = {"AUTO_INCREMENT": 13, "SHARD_ROW_ID_BITS": 16, "COMMENT": 17, "CHARSET": 22, "COLLATE": 22}


def _table_options(cur: Cursor) -> int | str | None:
    """Table options, several possibly in one clause (`AUTO_INCREMENT = 5 COMMENT = 'x'`): all of one
    code, else not placed (TiDB would run them as separate changes)."""
    codes: list[int] = []
    while cur.peek() is not None:
        cur.accept_word("DEFAULT")
        if cur.accept_word("FORCE") and not cur.at_word("AUTO_INCREMENT"):
            return None
        if cur.accept_word("CHARACTER"):
            if not cur.accept_word("SET"):
                return None
            code = 22
        else:
            word = _upper(cur.peek())
            if word not in _OPTION_CODES:
                return None
            cur.i += 1
            code = _OPTION_CODES[word]
        if cur.at_punct("="):
            cur.i += 1
        if cur.peek() is None:
            return None
        cur.i += 1  # the option's value
        codes.append(code)
    if len(set(codes)) > 1:
        return f"its table options have different DDL types {sorted(set(codes))}: split them upstream"
    return codes[0] if codes else None


def _add(cur: Cursor) -> int | None:
    if cur.accept_word("COLUMN"):
        return 5
    if cur.at_punct("("):
        return 5
    if cur.at_word(*_INDEX_WORDS):
        return 7
    if cur.accept_word("PRIMARY"):
        return 32 if cur.at_word("KEY") else None
    if cur.accept_word("FOREIGN"):
        return 9 if cur.at_word("KEY") else None
    if cur.at_word("PARTITION"):
        return 19
    if cur.accept_word("CONSTRAINT"):
        if not cur.at_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            _skip_name(cur)
        if cur.accept_word("PRIMARY"):
            return 32 if cur.at_word("KEY") else None
        if cur.at_word("UNIQUE"):
            return 7
        if cur.accept_word("FOREIGN"):
            return 9 if cur.at_word("KEY") else None
        return None
    if cur.at_word("CHECK"):
        return None
    tok = cur.peek()
    if tok is not None and tok.kind in ("word", "ident"):  # ADD c INT: COLUMN is optional
        return 5
    return None
