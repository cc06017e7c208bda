"""The one MySQL tokenizer: tokens and a cursor for the DDL readers (`classify`, `statements`,
`partitions`), `sanitize` (TiDB-only words sqlglot rejects) and backtick quoting. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from replicator.errors import DdlError

TokenKind = Literal["word", "ident", "string", "number", "punct"]


@dataclass(frozen=True)
class Token:
    """One lexical token: `text` is the identifier/string *value* (unquoted, unescaped)."""

    kind: TokenKind
    text: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words

    def is_punct(self, ch: str) -> bool:
        return self.kind == "punct" and self.text == ch


def quote_ident(name: str) -> str:
    """Backtick-quote one identifier (backticks doubled), as MySQL and Spark SQL both read it:
    upstream names are untrusted."""
    return "`" + name.replace("`", "``") + "`"


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\", "'": "'", '"': '"'}
_NUMBER_RE = re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD_RE = re.compile(r"[A-Za-z0-9_$\u0080-\U0010ffff]+")


_EXEC_OPEN_RE = re.compile(r"/\*!\d*|/\*T!(?:\[[^\]]*\])?")


def tokenize(query: str, *, executable: bool = False) -> list[Token]:
    """MySQL tokens; comments and whitespace dropped. DdlError on an unterminated quote/comment.

    With `executable`, the text inside MySQL's and TiDB's executable comments (`/*! .. */`,
    `/*!50100 .. */`, `/*T![clustered_index] .. */`) is read as statement text, as the server
    reads it: what a statement *does* (its DDL type) can stand there."""
    out: list[Token] = []
    i, n = 0, len(query)
    open_exec = 0
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif executable and (m := _EXEC_OPEN_RE.match(query, i)):
            open_exec += 1
            i = m.end()
        elif open_exec and query.startswith("*/", i):
            open_exec -= 1
            i += 2
        elif c == "#" or (query.startswith("--", i) and (i + 2 == n or query[i + 2].isspace())):
            j = query.find("\n", i)
            i = n if j < 0 else j + 1
        elif query.startswith("/*", i):
            j = query.find("*/", i + 2)
            if j < 0:
                raise DdlError(f"unterminated comment in {query!r}")
            i = j + 2
        elif c == "`":
            j, buf = i + 1, []
            while True:
                k = query.find("`", j)
                if k < 0:
                    raise DdlError(f"unterminated `identifier` in {query!r}")
                buf.append(query[j:k])
                if query.startswith("``", k):
                    buf.append("`")
                    j = k + 2
                    continue
                break
            out.append(Token("ident", "".join(buf), i, k + 1))
            i = k + 1
        elif c in "'\"":
            j, chars = i + 1, []
            while True:
                if j >= n:
                    raise DdlError(f"unterminated string in {query!r}")
                ch = query[j]
                if ch == "\\" and j + 1 < n:
                    nxt = query[j + 1]
                    chars.append(_ESCAPES.get(nxt, "\\" + nxt if nxt in "%_" else nxt))
                    j += 2
                elif ch == c:
                    if j + 1 < n and query[j + 1] == c:
                        chars.append(c)
                        j += 2
                    else:
                        break
                else:
                    chars.append(ch)
                    j += 1
            out.append(Token("string", "".join(chars), i, j + 1))
            i = j + 1
        else:
            m = _NUMBER_RE.match(query, i)
            w = _WORD_RE.match(query, i)
            if m and (not w or m.end() >= w.end()):
                out.append(Token("number", m.group(), i, m.end()))
                i = m.end()
            elif w:
                out.append(Token("word", w.group(), i, w.end()))
                i = w.end()
            else:
                out.append(Token("punct", c, i, i + 1))
                i += 1
    return out


class Cursor:
    """Recursive-descent helper over tokens; every failure is a DdlError naming the query."""

    def __init__(self, query: str, tokens: Sequence[Token] | None = None) -> None:
        self.query = query
        self.toks = list(tokens if tokens is not None else tokenize(query))
        while self.toks and self.toks[-1].is_punct(";"):
            self.toks.pop()
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def fail(self, what: str) -> DdlError:
        tok = self.peek()
        where = f"at {tok.text!r} (character {tok.start})" if tok else "at the end"
        return DdlError(f"cannot parse {self.query!r}: expected {what} {where}")

    def next(self, what: str = "more input") -> Token:
        tok = self.peek()
        if tok is None:
            raise self.fail(what)
        self.i += 1
        return tok

    def at_word(self, *words: str, k: int = 0) -> bool:
        """Whether the token `k` ahead is one of `words` (case-insensitive), without moving."""
        tok = self.peek(k)
        return tok is not None and tok.is_word(*words)

    def at_punct(self, ch: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.is_punct(ch)

    def accept_word(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_word(*words):
            self.i += 1
            return True
        return False

    def expect_word(self, *words: str) -> None:
        if not self.accept_word(*words):
            raise self.fail(" or ".join(words))

    def accept_punct(self, ch: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_punct(ch):
            self.i += 1
            return True
        return False

    def expect_punct(self, ch: str) -> None:
        if not self.accept_punct(ch):
            raise self.fail(repr(ch))

    def name(self, what: str = "a name") -> str:
        tok = self.next(what)
        if tok.kind not in ("word", "ident"):
            self.i -= 1
            raise self.fail(what)
        return tok.text

    def table_name(self) -> tuple[str | None, str]:
        first = self.name("a table name")
        if self.accept_punct("."):
            return first, self.name("a table name")
        return None, first

    def expect_end(self) -> None:
        if not self.at_end():
            raise self.fail("the end of the statement")

    def skip_balanced(self) -> None:
        """Skip one token, or a whole parenthesized group when at '('."""
        depth = 0
        while True:
            tok = self.next("a closing parenthesis")
            if tok.is_punct("("):
                depth += 1
            elif tok.is_punct(")"):
                depth -= 1
            if depth <= 0:
                return


def alter_table_head(cur: Cursor) -> tuple[str | None, str] | None:
    """`ALTER [ONLINE|OFFLINE] [IGNORE] TABLE name`: (schema, table), or None for another statement."""
    if not cur.accept_word("ALTER"):
        return None
    cur.accept_word("ONLINE", "OFFLINE")
    cur.accept_word("IGNORE")
    if not cur.accept_word("TABLE"):
        return None
    return cur.table_name()


# ---------------------------------------------------------------------------------------------
# TiDB-only words sqlglot rejects

_TIDB_ONLY = ("CLUSTERED", "NONCLUSTERED")


def sanitize(query: str) -> str:
    """Drop TiDB-only tokens sqlglot cannot parse (`CLUSTERED`, `NONCLUSTERED`, `AUTO_RANDOM(n)`).

    They are physical-layout hints with no meaning for the Delta side; text inside strings and
    comments is left alone (positions come from the tokenizer).
    """
    try:
        toks = tokenize(query)
    except DdlError:
        return query
    cut: list[tuple[int, int]] = []
    for k, tok in enumerate(toks):
        if tok.is_word(*_TIDB_ONLY):
            cut.append((tok.start, tok.end))
        elif tok.is_word("AUTO_RANDOM"):
            end = tok.end
            if k + 1 < len(toks) and toks[k + 1].is_punct("("):
                close = next((t for t in toks[k + 1:] if t.is_punct(")")), None)
                if close is not None:
                    end = close.end
            cut.append((tok.start, end))
    if not cut:
        return query
    parts, pos = [], 0
    for a, b in cut:
        parts.append(query[pos:a])
        pos = b
    parts.append(query[pos:])
    return " ".join(p.strip() for p in parts if p.strip())
