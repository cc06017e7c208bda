"""A DDL statement's TiDB DDL type code (1-36), from its text: for protocols that carry no code.

canal-json sends a DDL's SQL but not its TiDB action type, while the Delta side (`delta/ddl/rules.py`)
applies DDL by that code. `classify_ddl` reads the statement (a small MySQL tokenizer, no SQL is
executed, no Spark) and returns the code TiDB gives the same statement, so every protocol reaches the
one DDL path. It never guesses: a statement it cannot place, or an `ALTER TABLE` whose clauses have
different codes (TiDB's multi-schema change, type 61, which the DDL table does not know either),
raises `DecodeError` (the engine dead-letters it like any undecodable message).

`CANAL_EVENT_TYPES` is the reverse direction TiCDC's canal encoder uses (code -> canal `type`:
CREATE, ERASE, ALTER, TRUNCATE, RENAME, CINDEX, DINDEX, QUERY): the decoder checks a classification
against the message's `type` and the encoder writes it.

Code 31 (Update TiFlash Replica Status) is a TiDB-internal job with no statement of its own: no text
classifies to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from replicator.errors import DecodeError

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


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "word" (text upper-cased), "name" (quoted identifier), "string", "number", "punct"
    text: str


_TOKEN_RE: Final = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*|--(?:\s[^\n]*)?(?:\n|$)|/\*(?!!|T!).*?\*/)
  | (?P<exec_open>/\*!\d*|/\*T!(?:\[[^\]]*\])?)
  | (?P<exec_close>\*/)
  | (?P<name>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b)
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010ffff]+)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _tokens(query: str) -> list[_Tok]:
    """MySQL tokens: comments dropped, executable comments (`/*! .. */`, `/*T![..] .. */`) kept as text."""
    out: list[_Tok] = []
    pos = 0
    while pos < len(query):
        m = _TOKEN_RE.match(query, pos)
        if m is None or m.end() == pos:  # only an unterminated quote or comment gets here
            raise DecodeError(f"DDL statement {_short(query)} has an unterminated quote or comment")
        pos = m.end()
        kind = m.lastgroup or "punct"
        text = m.group()
        if kind in ("ws", "comment", "exec_open", "exec_close"):
            continue
        if text[0] in "'\"" and kind == "punct":
            raise DecodeError(f"DDL statement {_short(query)} has an unterminated string")
        if kind == "punct" and (text == "`" or query.startswith("/*", m.start())):
            raise DecodeError(f"DDL statement {_short(query)} has an unterminated quote or comment")
        if kind == "word":
            text = text.upper()
        out.append(_Tok(kind, text))
    while out and out[-1].kind == "punct" and out[-1].text == ";":
        out.pop()
    return out


def _short(text: str, limit: int = 80) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


class _Cur:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def is_word(self, *words: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind == "word" and tok.text in words

    def is_punct(self, ch: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind == "punct" and tok.text == ch

    def accept(self, *words: str) -> bool:
        if self.is_word(*words):
            self.i += 1
            return True
        return False

    def skip_name(self) -> bool:
        """A possibly qualified name (`db`.`t`)."""
        tok = self.peek()
        if tok is None or tok.kind not in ("word", "name"):
            return False
        self.i += 1
        if self.is_punct("."):
            self.i += 1
            if self.peek() is not None:
                self.i += 1
        return True


_CREATE_TARGETS: Final = {"DATABASE": 1, "SCHEMA": 1, "TABLE": 3, "VIEW": 21, "INDEX": 7, "SEQUENCE": 34}
_DROP_TARGETS: Final = {"DATABASE": 2, "SCHEMA": 2, "TABLE": 4, "VIEW": 24, "INDEX": 8, "SEQUENCE": 36}
_PARTITION_OPS: Final = {"DROP": 20, "TRUNCATE": 23, "ADD": 19}
_INDEX_WORDS: Final = ("INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL")
_CREATE_PREFIX: Final = frozenset(("OR", "REPLACE", "ALGORITHM", "DEFINER", "SQL", "SECURITY", "UNIQUE", "FULLTEXT",
                                   "SPATIAL", "CURRENT_USER", "UNDEFINED", "MERGE", "TEMPTABLE", "INVOKER"))


def classify_ddl(query: str) -> int:
    """The TiDB DDL type code of one DDL statement; `DecodeError` when it cannot be placed exactly."""
    code = _classify(_Cur(_tokens(query)))
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
        cur = _Cur(_tokens(query))
    except DecodeError:
        return False
    if not cur.accept("ALTER"):
        return False
    cur.accept("ONLINE", "OFFLINE")
    cur.accept("IGNORE")
    return cur.accept("TABLE")


def _classify(cur: _Cur) -> int | str | None:
    if cur.accept("CREATE"):
        return _create(cur)
    if cur.accept("DROP"):
        if cur.is_word("TEMPORARY"):
            return "temporary tables are not replicated by TiCDC"
        tok = cur.peek()
        return _DROP_TARGETS.get(tok.text) if tok is not None and tok.kind == "word" else None
    if cur.accept("ALTER"):
        if cur.accept("DATABASE", "SCHEMA"):
            return _alter_database(cur)
        if cur.accept("SEQUENCE"):
            return 35
        cur.accept("ONLINE", "OFFLINE")
        cur.accept("IGNORE")
        if cur.accept("TABLE") and cur.skip_name():
            return _alter_table(cur)
        return None
    if cur.accept("TRUNCATE"):
        cur.accept("TABLE")
        return 11 if cur.skip_name() else None
    if cur.accept("RENAME"):
        return 14 if cur.accept("TABLE", "TABLES") else None
    if cur.accept("RECOVER"):
        return 25 if cur.accept("TABLE") else None
    if cur.accept("FLASHBACK"):
        return 25 if cur.accept("TABLE") else None
    if cur.accept("LOCK"):
        return 27 if cur.accept("TABLE", "TABLES") else None
    if cur.accept("UNLOCK"):
        return 28 if cur.accept("TABLE", "TABLES") else None
    if cur.accept("ADMIN"):
        return 29 if cur.accept("REPAIR") and cur.accept("TABLE") else None
    return None


def _create(cur: _Cur) -> int | str | None:
    """CREATE [OR REPLACE] [ALGORITHM = x] [DEFINER = u@h] [SQL SECURITY x] VIEW | [UNIQUE ..] INDEX | ..."""
    while (tok := cur.peek()) is not None:
        if tok.kind == "word" and tok.text in _CREATE_TARGETS:
            return _CREATE_TARGETS[tok.text]
        if tok.kind == "word" and tok.text == "TEMPORARY":
            return "temporary tables are not replicated by TiCDC"
        if tok.kind == "punct" and tok.text in "=@":
            cur.i += 2  # the value of ALGORITHM / DEFINER / SECURITY, or a host
            continue
        if tok.kind == "punct" and tok.text in "()":  # CURRENT_USER()
            cur.i += 1
            continue
        if tok.kind != "word" or tok.text not in _CREATE_PREFIX:
            return None
        cur.i += 1
    return None


def _alter_database(cur: _Cur) -> int | None:
    rest = [t.text for t in cur.toks[cur.i:] if t.kind == "word"]
    if any(w in ("CHARSET", "CHARACTER", "COLLATE") for w in rest) and not any(
        w in ("PLACEMENT", "TIFLASH", "ENCRYPTION", "READ_ONLY") for w in rest
    ):
        return 26
    return None


def _clauses(cur: _Cur) -> list[list[_Tok]]:
    """The ALTER TABLE clauses: the rest split at commas outside parentheses."""
    out: list[list[_Tok]] = [[]]
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


def _alter_table(cur: _Cur) -> int | str | None:
    # Partition clauses name several partitions after one verb (DROP PARTITION p1, p2): whole statement.
    first, second = cur.peek(), cur.peek(1)
    if (first is not None and first.kind == "word" and first.text in _PARTITION_OPS
            and second is not None and second.kind == "word" and second.text == "PARTITION"):
        return _PARTITION_OPS[first.text]
    clauses = _clauses(cur)
    codes: list[int] = []
    for clause in clauses:
        code = _alter_clause(_Cur(clause))
        if code is None or isinstance(code, str):
            return code
        codes.append(code)
    if len(set(codes)) > 1:
        return (f"its clauses have different DDL types {sorted(set(codes))} (a TiDB multi-schema change, "
                "type 61, which the DDL table does not know): split it into one statement per change upstream")
    return codes[0] if codes else None


def _alter_clause(cur: _Cur) -> int | str | None:
    if cur.accept("ADD"):
        return _add(cur)
    if cur.accept("DROP"):
        if cur.accept("PRIMARY"):
            return 33 if cur.accept("KEY") else None
        if cur.accept("FOREIGN"):
            return 10 if cur.accept("KEY") else None
        if cur.is_word("INDEX", "KEY"):
            return 8
        if cur.is_word("PARTITION"):
            return 20
        if cur.is_word("CHECK", "CONSTRAINT"):
            return None
        if cur.accept("COLUMN") or cur.peek() is not None:
            return 6
        return None
    if cur.accept("MODIFY", "CHANGE"):
        return 12
    if cur.accept("RENAME"):
        if cur.is_word("COLUMN"):
            return 12
        if cur.is_word("INDEX", "KEY"):
            return 18
        return 14 if cur.peek() is not None else None
    if cur.accept("ALTER"):
        if cur.is_word("INDEX", "CHECK", "CONSTRAINT"):
            return None
        cur.accept("COLUMN")
        if not cur.skip_name():
            return None
        if (cur.accept("SET") and cur.is_word("DEFAULT")) or (cur.accept("DROP") and cur.is_word("DEFAULT")):
            return 15
        return None
    if cur.accept("TRUNCATE"):
        return 23 if cur.is_word("PARTITION") else None
    if cur.accept("CONVERT"):
        return 22 if cur.is_word("TO") else None
    if cur.accept("SET"):
        return 30 if cur.is_word("TIFLASH") else None
    return _table_options(cur)


_OPTION_CODES: Final = {"AUTO_INCREMENT": 13, "SHARD_ROW_ID_BITS": 16, "COMMENT": 17, "CHARSET": 22, "COLLATE": 22}


def _table_options(cur: _Cur) -> int | str | None:
    """Table options, several possibly in one clause (`AUTO_INCREMENT = 5 COMMENT = 'x'`): all of one
    code, else not placed (TiDB would run them as separate changes)."""
    codes: list[int] = []
    while cur.peek() is not None:
        cur.accept("DEFAULT")
        if cur.accept("FORCE") and not cur.is_word("AUTO_INCREMENT"):
            return None
        if cur.accept("CHARACTER"):
            if not cur.accept("SET"):
                return None
            code = 22
        else:
            tok = cur.peek()
            if tok is None or tok.kind != "word" or tok.text not in _OPTION_CODES:
                return None
            cur.i += 1
            code = _OPTION_CODES[tok.text]
        if cur.is_punct("="):
            cur.i += 1
        if cur.peek() is None:
            return None
        cur.i += 1  # the option's value
        codes.append(code)
    if len(set(codes)) > 1:
        return f"its table options have different DDL types {sorted(set(codes))}: split them upstream"
    return codes[0] if codes else None


def _add(cur: _Cur) -> int | None:
    if cur.accept("COLUMN"):
        return 5
    if cur.is_punct("("):
        return 5
    if cur.is_word(*_INDEX_WORDS):
        return 7
    if cur.accept("PRIMARY"):
        return 32 if cur.is_word("KEY") else None
    if cur.accept("FOREIGN"):
        return 9 if cur.is_word("KEY") else None
    if cur.is_word("PARTITION"):
        return 19
    if cur.accept("CONSTRAINT"):
        if not cur.is_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cur.skip_name()
        if cur.accept("PRIMARY"):
            return 32 if cur.is_word("KEY") else None
        if cur.is_word("UNIQUE"):
            return 7
        if cur.accept("FOREIGN"):
            return 9 if cur.is_word("KEY") else None
        return None
    if cur.is_word("CHECK"):
        return None
    tok = cur.peek()
    if tok is not None and tok.kind in ("word", "name"):  # ADD c INT: COLUMN is optional
        return 5
    return None
