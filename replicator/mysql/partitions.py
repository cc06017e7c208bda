"""The partition model (`Partitioning`, kept in the catalog as canonical MySQL text), read from
a CREATE TABLE's `PARTITION BY` clause and from `ALTER TABLE .. ADD|DROP|TRUNCATE PARTITION`. Pure.

Its translation into a Spark predicate is the Delta side's (`delta/ddl/partitions.py`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, cast

from replicator.errors import DdlError
from replicator.mysql.tokens import Cursor, alter_table_head, quote_ident, tokenize

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


def _name_list(cur: Cursor) -> tuple[str, ...]:
    names = [cur.name("a partition name")]
    while cur.accept_punct(","):
        names.append(cur.name("a partition name"))
    return tuple(names)


def parse_partition_op(query: str) -> PartitionOp | None:
    """`ALTER TABLE t ADD|DROP|TRUNCATE PARTITION ...`, or None for any other statement."""
    cur = Cursor(query)
    head = alter_table_head(cur)
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
