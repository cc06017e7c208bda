"""Pure DDL text -> facts, for what sqlglot cannot parse (or parses loosely) in TiDB's MySQL dialect.

Nothing here touches Spark or executes upstream SQL: it tokenizes the query and reads it.
- A small MySQL tokenizer and cursor for hand-parsers: `RENAME TABLE a TO b, c TO d`,
  `RECOVER TABLE` / `FLASHBACK TABLE`, `ALTER TABLE .. ADD COLUMN (a int, b int)`,
  `ALTER TABLE .. ADD|DROP|TRUNCATE PARTITION`, the `PARTITION BY` clause of CREATE TABLE.
- The partition model (`Partitioning`), kept in the catalog as canonical MySQL text, and its
  translation into a Spark SQL predicate selecting exactly one partition's rows (rows carry only
  a physical partition id, so the partition expression is re-evaluated on the Delta side).
- Column defaults -> Spark literals (backfill of ADD COLUMN) and Delta DEFAULT expressions.
- Delta type-widening rules (what `ALTER COLUMN .. TYPE` accepts in delta-spark 4.0).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast

import sqlglot
from sqlglot import exp

from replicator.delta.typemap import ColumnSpec, quote_ident, quote_string
from replicator.errors import DdlError

# ---------------------------------------------------------------------------------------------
# Tokenizer

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


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\", "'": "'", '"': '"'}
_NUMBER_RE = re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD_RE = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")


def tokenize(query: str) -> list[Token]:
    """MySQL tokens; comments and whitespace dropped. DdlError on an unterminated quote/comment."""
    out: list[Token] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
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


# ---------------------------------------------------------------------------------------------
# Partition model

PExprKind = Literal["column", "number", "string", "null", "maxvalue", "call"]


@dataclass(frozen=True)
class PExpr:
    """A partitioning expression or bound: column, literal, MAXVALUE or FUNC(args)."""

    kind: PExprKind
    value: str = ""
    args: tuple[PExpr, ...] = ()

    def render(self) -> str:
        if self.kind == "column":
            return quote_ident(self.value)
        if self.kind == "string":
            return "'" + self.value.replace("\\", "\\\\").replace("'", "''") + "'"
        if self.kind == "null":
            return "NULL"
        if self.kind == "maxvalue":
            return "MAXVALUE"
        if self.kind == "call":
            return f"{self.value}({', '.join(a.render() for a in self.args)})"
        return self.value


@dataclass(frozen=True)
class PartitionDef:
    """One partition: RANGE bound tuple (one PExpr per column) or LIST value tuples."""

    name: str
    values: tuple[tuple[PExpr, ...], ...] = ()
    is_default: bool = False


Method = Literal["RANGE", "LIST", "HASH", "KEY"]


@dataclass(frozen=True)
class Partitioning:
    """A table's partitioning, enough to re-evaluate which partition a Delta row belongs to."""

    method: Method
    columns_form: bool  # RANGE COLUMNS / LIST COLUMNS
    exprs: tuple[PExpr, ...]  # the partitioning expression (RANGE/LIST/HASH) or column list
    partitions: tuple[PartitionDef, ...]

    def render(self) -> str:
        """Canonical MySQL text (what the catalog stores in TableSpec.partition_def)."""
        head = f"PARTITION BY {self.method}{' COLUMNS' if self.columns_form else ''}"
        head += f" ({', '.join(e.render() for e in self.exprs)})"
        defs = ", ".join(_render_def(self, p) for p in self.partitions)
        return f"{head} ({defs})"

    def index(self, name: str) -> int:
        for i, p in enumerate(self.partitions):
            if p.name.lower() == name.lower():
                return i
        raise DdlError(f"partition {name!r} is not in the table's partition definition ({self.render()})")

    def has(self, name: str) -> bool:
        return any(p.name.lower() == name.lower() for p in self.partitions)


def _render_def(part: Partitioning, p: PartitionDef) -> str:
    text = f"PARTITION {quote_ident(p.name)}"
    if p.is_default:
        return text + " DEFAULT"
    if part.method == "RANGE":
        bound = p.values[0]
        if len(bound) == 1 and bound[0].kind == "maxvalue" and not part.columns_form:
            return text + " VALUES LESS THAN MAXVALUE"
        return text + f" VALUES LESS THAN ({', '.join(v.render() for v in bound)})"
    if part.method == "LIST":
        items = [
            v[0].render() if len(v) == 1 else "(" + ", ".join(x.render() for x in v) + ")" for v in p.values
        ]
        return text + f" VALUES IN ({', '.join(items)})"
    return text


def _pexpr(cur: Cursor) -> PExpr:
    tok = cur.next("a partition expression")
    if tok.is_punct("-") or tok.is_punct("+"):
        num = cur.next("a number")
        if num.kind != "number":
            raise cur.fail("a number")
        return PExpr("number", ("-" if tok.text == "-" else "") + num.text)
    if tok.kind == "number":
        return PExpr("number", tok.text)
    if tok.kind == "string":
        return PExpr("string", tok.text)
    if tok.is_word("NULL"):
        return PExpr("null")
    if tok.is_word("MAXVALUE"):
        return PExpr("maxvalue")
    if tok.kind == "word" and cur.accept_punct("("):
        args: list[PExpr] = []
        if not cur.accept_punct(")"):
            while True:
                args.append(_pexpr(cur))
                if cur.accept_punct(")"):
                    break
                cur.expect_punct(",")
        return PExpr("call", tok.text.upper(), tuple(args))
    if tok.kind in ("word", "ident"):
        return PExpr("column", tok.text)
    cur.i -= 1
    raise DdlError(f"unsupported partition expression in {cur.query!r} at {tok.text!r}")


def _pexpr_list(cur: Cursor) -> tuple[PExpr, ...]:
    cur.expect_punct("(")
    items: list[PExpr] = []
    if cur.accept_punct(")"):
        return ()
    while True:
        items.append(_pexpr(cur))
        if cur.accept_punct(")"):
            return tuple(items)
        if not cur.accept_punct(","):
            raise DdlError(f"unsupported partition expression in {cur.query!r} (only columns, literals and "
                           f"FUNC(column) calls are understood)")


def _skip_options(cur: Cursor) -> None:
    """Skip partition options (ENGINE=, COMMENT=, PLACEMENT POLICY=, ...) up to ',' or ')'."""
    while True:
        tok = cur.peek()
        if tok is None or tok.is_punct(",") or tok.is_punct(")"):
            return
        if tok.is_word("SUBPARTITION") or (tok.is_punct("(")):
            raise DdlError(f"unsupported partition expression in {cur.query!r}: subpartitions")
        cur.next()


def _partition_defs(cur: Cursor) -> list[PartitionDef]:
    cur.expect_punct("(")
    defs: list[PartitionDef] = []
    while True:
        cur.expect_word("PARTITION")
        name = cur.name("a partition name")
        values: tuple[tuple[PExpr, ...], ...] = ()
        is_default = False
        if cur.accept_word("VALUES"):
            if cur.accept_word("LESS"):
                cur.expect_word("THAN")
                values = ((PExpr("maxvalue"),),) if cur.accept_word("MAXVALUE") else (_pexpr_list(cur),)
            elif cur.accept_word("IN"):
                cur.expect_punct("(")
                items: list[tuple[PExpr, ...]] = []
                while True:
                    tok = cur.peek()
                    if tok is not None and tok.is_punct("("):
                        items.append(_pexpr_list(cur))
                    elif tok is not None and tok.is_word("DEFAULT"):
                        cur.next()
                        is_default = True
                    else:
                        items.append((_pexpr(cur),))
                    if cur.accept_punct(")"):
                        break
                    cur.expect_punct(",")
                values = tuple(items)
            else:
                raise cur.fail("LESS THAN or IN")
        elif cur.accept_word("DEFAULT"):
            is_default = True
        _skip_options(cur)
        defs.append(PartitionDef(name, values, is_default))
        if cur.accept_punct(")"):
            return defs
        cur.expect_punct(",")


def _partition_count(cur: Cursor) -> int:
    tok = cur.next("a partition count")
    if tok.kind != "number" or not tok.text.isdigit() or int(tok.text) < 1:
        raise cur.fail("a positive partition count")
    return int(tok.text)


def parse_partitioning(text: str) -> Partitioning:
    """Parse a `PARTITION BY ...` clause (as written upstream or as stored canonically)."""
    try:
        return _parse_partitioning(text)
    except DdlError as exc:
        if "unsupported partition expression" in str(exc):
            raise
        raise DdlError(f"unsupported partition expression: {exc}") from None


def _parse_partitioning(text: str) -> Partitioning:
    cur = Cursor(text)
    cur.expect_word("PARTITION")
    cur.expect_word("BY")
    if cur.accept_word("LINEAR"):
        raise DdlError(f"unsupported partition expression: LINEAR hashing in {text!r}")
    kw = cur.next("RANGE, LIST, HASH or KEY")
    method = kw.text.upper()
    if method not in ("RANGE", "LIST", "HASH", "KEY"):
        raise DdlError(f"unsupported partition expression: PARTITION BY {kw.text} in {text!r}")
    columns_form = False
    if method in ("RANGE", "LIST") and cur.accept_word("COLUMNS"):
        columns_form = True
    if method == "KEY" and cur.accept_word("ALGORITHM"):
        cur.expect_punct("=")
        cur.next("an algorithm number")
    tok = cur.peek()
    if method == "RANGE" and tok is not None and tok.is_word("INTERVAL"):
        raise DdlError(f"unsupported partition expression: RANGE INTERVAL partitioning in {text!r}")
    exprs = _pexpr_list(cur)
    if (columns_form or method == "KEY") and any(e.kind != "column" for e in exprs):
        raise DdlError(f"unsupported partition expression: {method} COLUMNS/KEY takes plain columns in {text!r}")
    if not columns_form and method != "KEY" and len(exprs) != 1:
        raise DdlError(f"unsupported partition expression: {method} takes one expression in {text!r}")
    count = 0
    if cur.accept_word("PARTITIONS"):
        count = _partition_count(cur)
    if cur.accept_word("SUBPARTITION"):
        raise DdlError(f"unsupported partition expression: subpartitions in {text!r}")
    defs: list[PartitionDef] = []
    tok = cur.peek()
    if tok is not None and tok.is_punct("("):
        defs = _partition_defs(cur)
    cur.expect_end()
    if method in ("HASH", "KEY"):
        if not defs:
            defs = [PartitionDef(f"p{i}") for i in range(count or 1)]
    elif not defs:
        raise DdlError(f"{method} partitioning without partition definitions in {text!r}")
    names = [d.name.lower() for d in defs]
    if len(set(names)) != len(names):
        raise DdlError(f"duplicate partition names in {text!r}")
    return Partitioning(cast(Method, method), columns_form, exprs, tuple(defs))


def split_partition_clause(query: str) -> tuple[str, str | None]:
    """Split a CREATE TABLE into (statement without its PARTITION BY clause, the clause or None).

    sqlglot rejects several valid clauses (MAXVALUE, RANGE COLUMNS, HASH/KEY ... PARTITIONS n),
    so the clause is cut off at its top-level `PARTITION BY` and read by `parse_partitioning`.
    """
    toks = tokenize(query)
    depth = 0
    for k, tok in enumerate(toks):
        if tok.is_punct("("):
            depth += 1
        elif tok.is_punct(")"):
            depth -= 1
        elif depth == 0 and tok.is_word("PARTITION") and k + 1 < len(toks) and toks[k + 1].is_word("BY"):
            end = len(query)
            if toks[-1].is_punct(";"):
                end = toks[-1].start
            return query[: tok.start].rstrip(), query[tok.start: end].strip()
    return query, None


# ---------------------------------------------------------------------------------------------
# Partition -> Spark predicate

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_TIME_FUNCS = {"YEAR": "year", "MONTH": "month", "DAY": "dayofmonth", "DAYOFMONTH": "dayofmonth"}


def _lookup(columns: Mapping[str, ColumnSpec], name: str) -> ColumnSpec:
    col = columns.get(name) or next((c for k, c in columns.items() if k.lower() == name.lower()), None)
    if col is None:
        raise DdlError(f"partition expression names column {name!r}, which the table does not have")
    return col


def _number(text: str) -> str:
    if not re.fullmatch(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", text):
        raise DdlError(f"unsupported partition expression: number {text!r}")
    return text


def spark_expr(e: PExpr, columns: Mapping[str, ColumnSpec]) -> str:
    """A partitioning expression (or RANGE/LIST bound) as Spark SQL; time functions in UTC."""
    if e.kind == "column":
        return quote_ident(_lookup(columns, e.value).name)
    if e.kind == "number":
        return _number(e.value)
    if e.kind == "string":
        return quote_string(e.value)
    if e.kind == "null":
        return "NULL"
    if e.kind == "call" and len(e.args) == 1:
        arg = spark_expr(e.args[0], columns)
        if e.value in _TIME_FUNCS:
            return f"{_TIME_FUNCS[e.value]}(CAST({arg} AS DATE))"
        if e.value == "TO_DAYS":  # MySQL day number: TO_DAYS('1970-01-01') = 719528
            return f"(datediff(CAST({arg} AS DATE), DATE'1970-01-01') + 719528)"
        if e.value == "UNIX_TIMESTAMP":
            return f"unix_timestamp(CAST({arg} AS TIMESTAMP))"
    raise DdlError(f"unsupported partition expression {e.render()} (understood: columns, literals, "
                   "YEAR/MONTH/DAY/TO_DAYS/UNIX_TIMESTAMP of a column)")


def _typed(e: PExpr, col: ColumnSpec) -> str:
    """A RANGE/LIST COLUMNS literal as a Spark value of the column's type."""
    if e.kind == "null":
        return "NULL"
    if e.kind == "number":
        return f"CAST({quote_string(_number(e.value))} AS {col.spark_type})"
    if e.kind == "string":
        return f"CAST({quote_string(e.value)} AS {col.spark_type})"
    raise DdlError(f"unsupported partition expression: {e.render()} as a COLUMNS partition value")


def _less_than(cols: Sequence[str], bounds: Sequence[str | None]) -> str:
    """Row-tuple `cols < bounds` with NULL below every value and None standing for MAXVALUE."""
    if not cols:
        return "FALSE"
    c, b = cols[0], bounds[0]
    if b is None:
        return "TRUE"
    rest = _less_than(cols[1:], bounds[1:])
    tail = f" OR ({c} = {b} AND {rest})" if rest != "FALSE" else ""
    return f"({c} IS NULL OR {c} < {b}{tail})"


def _hash_operand(e: PExpr, columns: Mapping[str, ColumnSpec]) -> str:
    """TiDB's HASH input: a plain column's int64 value (BIGINT UNSIGNED reinterpreted), NULL as 0."""
    text = spark_expr(e, columns)
    if e.kind == "column":
        col = _lookup(columns, e.value)
        st = col.spark_type.upper().replace(" ", "")
        unsigned_bigint = st == "DECIMAL(20,0)" and "UNSIGNED" in col.tidb_type.upper()
        if unsigned_bigint:
            text = f"(CASE WHEN {text} >= 9223372036854775808 THEN {text} - 18446744073709551616 ELSE {text} END)"
        elif st not in _INTEGRAL:
            raise DdlError(f"unsupported partition expression: HASH of column {col.name!r} of type {col.spark_type}")
    return f"coalesce({text}, 0)"


def _key_operand(col: ColumnSpec) -> str:
    """TiDB KEY partitioning hashes each column's value text (NULL as one 0x00 byte) with CRC32."""
    st = col.spark_type.upper().replace(" ", "")
    tidb = col.tidb_type.upper()
    integral = st in _INTEGRAL or (st == "DECIMAL(20,0)" and "UNSIGNED" in tidb)
    if not integral or tidb.startswith(("BIT", "YEAR", "TINYINT(1)", "BOOL")):
        raise DdlError(f"unsupported partition expression: KEY partitioning on column {col.name!r} "
                       f"({col.tidb_type or col.spark_type}); only integer columns are understood")
    return f"coalesce(CAST(CAST({quote_ident(col.name)} AS STRING) AS BINARY), X'00')"


def partition_predicate(part: Partitioning, names: Sequence[str], columns: Sequence[ColumnSpec],
                        key: Sequence[str] = ()) -> str:
    """Spark SQL predicate true exactly for rows TiDB would place in the named partitions."""
    cols = {c.name: c for c in columns}
    preds = [_one_partition(part, part.index(n), cols, key) for n in names]
    return " OR ".join(f"({p})" for p in preds) if preds else "FALSE"


def _one_partition(part: Partitioning, i: int, cols: Mapping[str, ColumnSpec], key: Sequence[str]) -> str:
    p = part.partitions[i]
    n = len(part.partitions)
    if part.method == "HASH":
        return f"abs({_hash_operand(part.exprs[0], cols)} % {n}) = {i}"
    if part.method == "KEY":
        names = [e.value for e in part.exprs] or list(key)
        if not names:
            raise DdlError("unsupported partition expression: KEY() on a table without a primary key")
        parts = ", ".join(_key_operand(_lookup(cols, c)) for c in names)
        return f"(crc32(concat({parts})) % {n}) = {i}"
    if part.columns_form:
        targets = [_lookup(cols, e.value) for e in part.exprs]
        operands = [quote_ident(c.name) for c in targets]
    else:
        targets = []
        operands = [spark_expr(part.exprs[0], cols)]

    def bound(values: tuple[PExpr, ...]) -> list[str | None]:
        if len(values) != len(operands):
            raise DdlError(f"partition bound {[v.render() for v in values]} does not match "
                           f"{len(operands)} partitioning column(s)")
        out: list[str | None] = []
        for k, v in enumerate(values):
            if v.kind == "maxvalue":
                out.append(None)
            elif part.columns_form:
                out.append(_typed(v, targets[k]))
            else:
                out.append(spark_expr(v, cols))
        return out

    if part.method == "RANGE":
        upper = _less_than(operands, bound(p.values[0]))
        if i == 0:
            return upper
        return f"{upper} AND NOT {_less_than(operands, bound(part.partitions[i - 1].values[0]))}"

    def matches(d: PartitionDef) -> str:
        alts = []
        for v in d.values:
            pairs = zip(operands, bound(v), strict=True)
            alts.append(" AND ".join(f"{o} <=> {x if x is not None else 'NULL'}" for o, x in pairs))
        return " OR ".join(f"({a})" for a in alts) if alts else "FALSE"

    if p.is_default:
        others = [matches(d) for d in part.partitions if not d.is_default]
        own = matches(p) if p.values else "FALSE"
        return f"({own}) OR NOT ({' OR '.join(f'({o})' for o in others) or 'FALSE'})"
    return matches(p)


# ---------------------------------------------------------------------------------------------
# ALTER TABLE .. PARTITION


@dataclass(frozen=True)
class PartitionOp:
    schema: str | None
    table: str
    op: Literal["add", "drop", "truncate"]
    names: tuple[str, ...] = ()
    all: bool = False
    if_exists: bool = False
    defs: tuple[PartitionDef, ...] = ()
    count: int = 0


def _alter_table_head(cur: Cursor) -> tuple[str | None, str] | None:
    if not cur.accept_word("ALTER"):
        return None
    cur.accept_word("ONLINE", "OFFLINE")
    cur.accept_word("IGNORE")
    if not cur.accept_word("TABLE"):
        return None
    return cur.table_name()


def _name_list(cur: Cursor) -> tuple[str, ...]:
    names = [cur.name("a partition name")]
    while cur.accept_punct(","):
        names.append(cur.name("a partition name"))
    return tuple(names)


def parse_partition_op(query: str) -> PartitionOp | None:
    """`ALTER TABLE t ADD|DROP|TRUNCATE PARTITION ...`, or None for any other statement."""
    cur = Cursor(query)
    head = _alter_table_head(cur)
    if head is None:
        return None
    schema, table = head
    verb = cur.peek()
    after = cur.peek(1)
    if verb is None or after is None or not after.is_word("PARTITION"):
        return None
    if verb.is_word("ADD"):
        cur.i += 2
        if cur.accept_word("IF"):
            cur.expect_word("NOT")
            cur.expect_word("EXISTS")
        if cur.accept_word("PARTITIONS"):
            op = PartitionOp(schema, table, "add", count=_partition_count(cur))
        else:
            op = PartitionOp(schema, table, "add", defs=tuple(_partition_defs(cur)))
    elif verb.is_word("DROP"):
        cur.i += 2
        if_exists = cur.accept_word("IF")
        if if_exists:
            cur.expect_word("EXISTS")
        op = PartitionOp(schema, table, "drop", names=_name_list(cur), if_exists=if_exists)
    elif verb.is_word("TRUNCATE"):
        cur.i += 2
        if cur.accept_word("ALL"):
            op = PartitionOp(schema, table, "truncate", all=True)
        else:
            op = PartitionOp(schema, table, "truncate", names=_name_list(cur))
    else:
        return None
    cur.expect_end()
    return op


def add_partitions(part: Partitioning, op: PartitionOp) -> Partitioning:
    """The partitioning after ADD PARTITION (definitions already present are kept as they are)."""
    if op.count:
        if part.method not in ("HASH", "KEY"):
            raise DdlError(f"ADD PARTITION PARTITIONS {op.count} on {part.method} partitioning")
        start = len(part.partitions)
        new = [PartitionDef(f"p{start + k}") for k in range(op.count)]
    else:
        new = [d for d in op.defs if not part.has(d.name)]
    return replace(part, partitions=part.partitions + tuple(new))


# ---------------------------------------------------------------------------------------------
# RENAME TABLE / RECOVER TABLE / ALTER TABLE .. RENAME / ADD COLUMN (...)

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


def parse_alter_rename(query: str) -> tuple[Name, Name] | None:
    """`ALTER TABLE a RENAME [TO|AS] b` (sqlglot rejects `RENAME AS`); None for anything else."""
    cur = Cursor(query)
    head = _alter_table_head(cur)
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
    head = _alter_table_head(cur)
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


# ---------------------------------------------------------------------------------------------
# Defaults

_CURRENT_TS = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP")
_FSP_RE = re.compile(r"\((\d)\)")
_ZERO_DATE_RE = re.compile(r"^0{4}-0{2}-0{2}")


def _fsp(col: ColumnSpec) -> int:
    m = _FSP_RE.search(col.tidb_type)
    return int(m.group(1)) if m else 0


def _base_type(col: ColumnSpec) -> str:
    return re.split(r"[\s(]", col.tidb_type.strip().upper(), maxsplit=1)[0] if col.tidb_type else ""


DefaultValue = tuple[Literal["null", "text", "bytes", "now", "today"], str | bytes | None]


def _default_value(text: str) -> DefaultValue:
    """Classify an upstream DEFAULT (MySQL text) into a literal, CURRENT_TIMESTAMP, or NULL."""
    try:
        node = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise DdlError(f"cannot parse default {text!r}: {exc}") from None
    while isinstance(node, exp.Collate):
        node = node.this
    if isinstance(node, exp.Null):
        return "null", None
    if isinstance(node, exp.Literal):
        return "text", node.this if node.is_string else node.name
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "text", "-" + node.this.name
    if isinstance(node, exp.Boolean):
        return "text", "1" if node.this else "0"
    if isinstance(node, exp.HexString):
        raw = str(node.this)
        return "bytes", bytes.fromhex(raw if len(raw) % 2 == 0 else "0" + raw)
    if isinstance(node, exp.BitString):
        return "text", str(int(str(node.this) or "0", 2))
    if isinstance(node, exp.CurrentTimestamp) or (
        isinstance(node, exp.Anonymous | exp.Func) and node.sql("mysql").split("(")[0].upper() in _CURRENT_TS
    ):
        return "now", None
    if isinstance(node, exp.CurrentDate):
        return "today", None
    if isinstance(node, exp.Column) and node.name.upper() in _CURRENT_TS:
        return "now", None
    raise DdlError(f"default {text!r} is an expression whose value per existing row cannot be reproduced")


def _bytes_literal(data: bytes) -> str:
    return "X'" + data.hex().upper() + "'"


def _pad_time(text: str, fsp: int) -> str:
    head, _, frac = text.partition(".")
    return head + ("." + (frac + "0" * fsp)[:fsp] if fsp else "")


def value_literal(col: ColumnSpec, kind: str, value: str | bytes | None, when: dt.datetime) -> str | None:
    """A Spark literal of the column's Delta type for a classified upstream value (None: NULL)."""
    st = col.spark_type.upper().replace(" ", "")
    base = _base_type(col)
    if kind == "null":
        return None
    if kind in ("now", "today"):
        if st == "TIMESTAMP":
            micro = when.astimezone(dt.UTC)
            micro = micro.replace(microsecond=micro.microsecond - micro.microsecond % 10 ** (6 - _fsp(col)))
            return f"CAST({quote_string(micro.strftime('%Y-%m-%d %H:%M:%S.%f'))} AS TIMESTAMP)"
        if st == "TIMESTAMP_NTZ":
            naive = when.astimezone(dt.UTC).replace(tzinfo=None)
            naive = naive.replace(microsecond=naive.microsecond - naive.microsecond % 10 ** (6 - _fsp(col)))
            return f"CAST({quote_string(naive.strftime('%Y-%m-%d %H:%M:%S.%f'))} AS TIMESTAMP_NTZ)"
        if st == "DATE":
            return f"DATE{quote_string(when.astimezone(dt.UTC).date().isoformat())}"
        raise DdlError(f"CURRENT_TIMESTAMP default for column {col.name!r} of type {col.tidb_type or st}")
    if isinstance(value, bytes):
        if st == "BINARY":
            return _bytes_literal(_pad_binary(col, value))
        if st == "STRING":
            return quote_string(value.decode("utf-8", "replace"))
        return f"CAST({quote_string(str(int.from_bytes(value, 'big')))} AS {col.spark_type})"
    assert isinstance(value, str)
    if st == "STRING":
        if base == "TIME":
            return quote_string(_pad_time(value, _fsp(col)))
        return quote_string(value)
    if st == "BINARY":
        return _bytes_literal(_pad_binary(col, value.encode("utf-8")))
    if st in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ") and _ZERO_DATE_RE.match(value):
        return None  # a zero date has no Delta value: NULL, as --zero-dates null does for rows
    return f"CAST({quote_string(value)} AS {col.spark_type})"


def _pad_binary(col: ColumnSpec, data: bytes) -> bytes:
    m = re.fullmatch(r"BINARY\((\d+)\)", col.tidb_type.strip().upper().replace(" ", ""))
    if m and len(data) < int(m.group(1)):
        return data + b"\0" * (int(m.group(1)) - len(data))
    return data


def zero_value(col: ColumnSpec) -> tuple[str, str | bytes | None]:
    """TiDB's origin default of a NOT NULL column added without DEFAULT: the type's zero value."""
    st = col.spark_type.upper().replace(" ", "")
    base = _base_type(col)
    if col.labels and not col.is_set:
        return "text", col.labels[0]  # ENUM: its first element
    if base == "JSON":
        return "text", "null"
    if base == "TIME":
        return "text", "00:00:00"
    if st in ("STRING",):
        return "text", ""
    if st == "BINARY":
        return "bytes", b""
    if st in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        return "null", None  # zero date: see value_literal
    return "text", "0"


def backfill_literal(col: ColumnSpec, when: dt.datetime) -> str | None:
    """What existing rows hold in a column just added upstream, as a Spark literal (None: NULL)."""
    if col.default is None:
        if col.nullable:
            return None
        kind, value = zero_value(col)
        return value_literal(col, kind, value, when)
    kind, value = _default_value(col.default)
    if kind == "null":
        return None
    return value_literal(col, kind, value, when)


def delta_default(col: ColumnSpec) -> str | None:
    """A Delta column DEFAULT expression for the upstream default, or None when not expressible."""
    if col.default is None:
        return None
    try:
        kind, value = _default_value(col.default)
    except DdlError:
        return None
    st = col.spark_type.upper().replace(" ", "")
    if kind == "null":
        return "NULL"
    if kind in ("now", "today"):
        return {"TIMESTAMP": "current_timestamp()", "TIMESTAMP_NTZ": "localtimestamp()",
                "DATE": "current_date()"}.get(st)
    try:
        return value_literal(col, kind, value, dt.datetime.now(dt.UTC))
    except DdlError:
        return None


# ---------------------------------------------------------------------------------------------
# Delta type changes


def norm_type(t: str) -> str:
    """Normalize a Spark/Delta type name ('int', 'decimal(10, 2)', 'INTEGER') for comparison."""
    u = t.upper().replace(" ", "")
    return {"INTEGER": "INT", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT"}.get(u, u)


_DEC_RE = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def can_widen(old: str, new: str) -> bool:
    """Whether delta-spark 4.0 type widening does old -> new in place (`ALTER COLUMN .. TYPE`)."""
    o, n = norm_type(old), norm_type(new)
    if o == n:
        return False
    dn = _DEC_RE.match(n)
    if o in _INTEGRAL:
        if n in _INTEGRAL:
            return _INTEGRAL.index(n) > _INTEGRAL.index(o)
        if n == "DOUBLE":
            return o != "BIGINT"
        if dn:
            return int(dn.group(1)) - int(dn.group(2)) >= (20 if o == "BIGINT" else 10)
        return False
    if o == "FLOAT":
        return n == "DOUBLE"
    if o == "DATE":
        return n == "TIMESTAMP_NTZ"
    do = _DEC_RE.match(o)
    if do and dn:
        k1 = int(dn.group(1)) - int(do.group(1))
        k2 = int(dn.group(2)) - int(do.group(2))
        return k1 >= k2 >= 0
    return False


def cast_expr(column: str, old: str, new: str) -> str:
    """Spark expression converting a column's values old -> new like TiDB's MODIFY COLUMN does.

    Fractional -> integral rounds half away from zero (MySQL) instead of Spark's truncation.
    """
    o, n = norm_type(old), norm_type(new)
    src = quote_ident(column)
    if n in _INTEGRAL and (o in ("FLOAT", "DOUBLE") or _DEC_RE.match(o)):
        src = f"round({src})"
    return f"CAST({src} AS {new})"
