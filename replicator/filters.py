"""Table filters (`--include` / `--exclude`) in the TiDB tools' table-filter syntax, as TiCDC's
`[filter] rules` use it.

A rule is `schema.table`; each part is
- a plain name of identifier characters (`[0-9A-Za-z$_]` and any non-ASCII character),
- with wildcards as in fnmatch: `*` (any run), `?` (one character), `[a-z]`, `[!a-z]`,
- `\\` before a punctuation character to make it literal (`db\\.x.*`),
- a whole part quoted with back quotes or double quotes (`` `my.db`.`t` ``; a doubled quote is one
  literal quote), or a regular expression between slashes (`/^db\\d+$/`, matched anywhere in the
  name, as the TiDB tools do).
Matching ignores case, as TiCDC does by default (`case-sensitive = false`).

Semantics (the issue's, simpler than the tools' last-match-wins): a table is replicated when it
matches some include rule (no include rule: every table) and no exclude rule; exclude wins. A
`!rule` given as an include is an exclude, so a TiCDC rule list pastes as it is, with exclude-wins
precedence. Schema-level DDL (CREATE / DROP DATABASE) is replicated when some include rule's
schema part matches and no exclude rule excludes the whole schema (`db.*`).

Pure: no Spark or Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from replicator.errors import ConfigError

Reason = Literal["excluded", "not_included"]
_IDENT: Final = re.compile(r"[0-9A-Za-z$_\u0080-\U0010ffff]")


@dataclass(frozen=True)
class Rule:
    """One parsed rule: a matcher per part, and whether it excludes."""

    text: str
    schema: re.Pattern[str]
    table: re.Pattern[str]
    exclude: bool
    schema_regex: bool = False
    table_regex: bool = False
    whole_schema: bool = False  # the table part matches every name (`*`)

    def matches(self, schema: str, table: str) -> bool:
        return self._part(self.schema, self.schema_regex, schema) and self._part(self.table, self.table_regex, table)

    def matches_schema(self, schema: str) -> bool:
        return self._part(self.schema, self.schema_regex, schema)

    @staticmethod
    def _part(pattern: re.Pattern[str], regex: bool, name: str) -> bool:
        return (pattern.search(name) if regex else pattern.fullmatch(name)) is not None


def _bad(rule: str, why: str) -> ConfigError:
    return ConfigError(f"table filter {rule!r}: {why}; rules are schema.table with *, ?, [a-z], [!a-z], "
                       "\\ before a punctuation character, `quoted` or \"quoted\" names, or /regex/")


def _part(rule: str, text: str, i: int) -> tuple[str, bool, bool, int]:
    """One part of `text` from index i: (regex source, is a /regex/, is `*`, index after it)."""
    if i < len(text) and text[i] in "`\"":
        quote, j, lit = text[i], i + 1, []
        while True:
            if j >= len(text):
                raise _bad(rule, f"unterminated {quote}quoted{quote} name")
            if text[j] == quote:
                if j + 1 < len(text) and text[j + 1] == quote:
                    lit.append(quote)
                    j += 2
                    continue
                return re.escape("".join(lit)), False, False, j + 1
            lit.append(text[j])
            j += 1
    if i < len(text) and text[i] == "/":
        j, src = i + 1, []
        while j < len(text) and text[j] != "/":
            if text[j] == "\\" and j + 1 < len(text) and text[j + 1] == "/":
                src.append("/")
                j += 2
                continue
            src.append(text[j])
            j += 1
        if j >= len(text):
            raise _bad(rule, "unterminated /regex/")
        try:
            re.compile("".join(src))
        except re.error as exc:
            raise _bad(rule, f"invalid regular expression: {exc}") from None
        return "".join(src), True, False, j + 1
    out: list[str] = []
    start = i
    while i < len(text) and text[i] != ".":
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text) or (text[i + 1].isascii() and text[i + 1].isalnum()):
                raise _bad(rule, "\\ must precede a punctuation character")
            out.append(re.escape(text[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = text.find("]", i + 2)
            if end < 0:
                raise _bad(rule, "unterminated [character class]")
            body = text[i + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\").replace("^", "\\^") + "]")
            i = end + 1
            continue
        elif _IDENT.fullmatch(c):
            out.append(re.escape(c))
        else:
            raise _bad(rule, f"character {c!r} must be escaped with \\ or the name quoted")
        i += 1
    if i == start:
        raise _bad(rule, "empty name")
    return "".join(out), False, text[start:i] == "*", i


def parse_rule(text: str, *, exclude: bool = False) -> Rule:
    """One rule; `!rule` excludes. ConfigError saying what is wrong."""
    rule = text.strip()
    if rule.startswith("!"):
        exclude, body = True, rule[1:].strip()
    else:
        body = rule
    if not body:
        raise _bad(text, "empty rule")
    schema, schema_regex, _star, i = _part(text, body, 0)
    if i >= len(body) or body[i] != ".":
        raise _bad(text, "expected schema.table (a `.` between the two parts)")
    table, table_regex, table_star, j = _part(text, body, i + 1)
    if j != len(body):
        raise _bad(text, f"unexpected {body[j:]!r} after the table part")
    flags = re.IGNORECASE | re.DOTALL
    return Rule(rule, re.compile(schema, flags), re.compile(table, flags), exclude, schema_regex, table_regex,
                table_star)


class TableFilter:
    """Which tables are replicated: include rules (none: all) minus exclude rules (exclude wins)."""

    def __init__(self, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        rules = [parse_rule(r) for r in include] + [parse_rule(r, exclude=True) for r in exclude]
        self.include = [r for r in rules if not r.exclude]
        self.exclude = [r for r in rules if r.exclude]

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude)

    def reason(self, schema: str, table: str) -> Reason | None:
        """None when the table is replicated, else why not."""
        if any(r.matches(schema, table) for r in self.exclude):
            return "excluded"
        if self.include and not any(r.matches(schema, table) for r in self.include):
            return "not_included"
        return None

    def schema_reason(self, schema: str) -> Reason | None:
        """For schema-level DDL: None when some table of `schema` may be replicated."""
        if any(r.whole_schema and r.matches_schema(schema) for r in self.exclude):
            return "excluded"
        if self.include and not any(r.matches_schema(schema) for r in self.include):
            return "not_included"
        return None

    def describe(self) -> str:
        inc = ", ".join(r.text for r in self.include) or "every table"
        exc = ", ".join(r.text for r in self.exclude)
        return f"include {inc}" + (f"; exclude {exc}" if exc else "")
