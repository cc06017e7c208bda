"""Table filters: the rule syntax (replicator/filters.py) and what is skipped (engine/filtering.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.engine.filtering import EventFilter
from replicator.errors import ConfigError
from replicator.events import Column, DdlEvent, Op, Resolved, RowChange
from replicator.filters import TableFilter, parse_rule


@pytest.mark.parametrize(("rule", "schema", "table", "hit"), [
    ("shop.orders", "shop", "orders", True),
    ("shop.orders", "SHOP", "Orders", True),  # case-insensitive, as TiCDC by default
    ("shop.orders", "shop", "orders_v2", False),
    ("shop.*", "shop", "anything", True),
    ("shop.*", "shop2", "t", False),
    ("*.*", "a", "b", True),
    ("db?.t", "db1", "t", True),
    ("db?.t", "db10", "t", False),
    ("db[0-9].t[!a-c]", "db7", "tz", True),
    ("db[0-9].t[!a-c]", "db7", "tb", False),
    ("`my.db`.`t``q`", "my.db", "t`q", True),
    ("\"my.db\".*", "my.db", "x", True),
    ("my\\.db.*", "my.db", "x", True),
    ("/^db\\d+$/./ord/", "db12", "orders", True),
    ("/^db\\d+$/./ord/", "dbx", "orders", False),
    ("shop.ünï*", "shop", "ünïcode", True),
    ("shop.`*`", "shop", "*", True),
    ("shop.`*`", "shop", "x", False),
])
def test_rule_syntax(rule: str, schema: str, table: str, hit: bool) -> None:
    assert parse_rule(rule).matches(schema, table) is hit


@pytest.mark.parametrize("rule", ["shop", "shop.", ".t", "shop.t.x", "sh-op.t", "`shop.t", "shop.[a-", "/(/.t",
                                  "shop.t\\a", "!", ""])
def test_bad_rules_name_the_rule(rule: str) -> None:
    with pytest.raises(ConfigError, match="table filter"):
        parse_rule(rule)


def test_exclude_wins_and_bang_rules_exclude() -> None:
    f = TableFilter(["shop.*", "crm.*", "!crm.secrets"], ["shop.audit_*"])
    assert f.reason("shop", "orders") is None
    assert f.reason("shop", "audit_2024") == "excluded"
    assert f.reason("crm", "secrets") == "excluded"
    assert f.reason("hr", "people") == "not_included"
    assert TableFilter([], ["*.tmp_*"]).reason("any", "t") is None  # no include: every table
    assert not TableFilter().active
    assert f.schema_reason("shop") is None and f.schema_reason("hr") == "not_included"
    assert TableFilter([], ["tmp.*"]).schema_reason("tmp") == "excluded"
    assert TableFilter([], ["tmp.x"]).schema_reason("tmp") is None  # other tables of tmp are replicated


def row(schema: str, table: str, ts: int = 5) -> RowChange:
    return RowChange(ts, schema, table, Op.INSERT, (Column("id", 8, 0x0A, 1),))


def ddl(query: str, schema: str = "shop", table: str = "t", code: int = 14) -> DdlEvent:
    return DdlEvent(9, schema, table, code, query)


def test_events_of_filtered_tables_are_skipped_and_counted() -> None:
    f = EventFilter(TableFilter(["shop.*"], ["shop.tmp"]))
    events = [row("shop", "a"), row("shop", "tmp"), row("crm", "x"), Resolved(10),
              ddl("ALTER TABLE `shop`.`tmp` ADD COLUMN c INT", table="tmp", code=5),
              ddl("CREATE DATABASE crm", schema="crm", table="", code=1),
              ddl("CREATE DATABASE shop", schema="shop", table="", code=1)]
    kept = f.apply(events)
    assert kept == [events[0], events[3], events[6]]
    assert f.counts.to_json() == {"rows": {"excluded": 1, "not_included": 1},
                                  "ddl": {"excluded": 1, "not_included": 1}}


def test_renames_across_the_boundary() -> None:
    f = EventFilter(TableFilter(["shop.orders", "shop.customers", "shop.new_*"]))
    inside = ddl("RENAME TABLE `shop`.`customers` TO `shop`.`new_customers`")
    assert f.apply([inside]) == [inside]
    assert f.apply([ddl("RENAME TABLE shop.orders TO shop.orders_v2")]) == []  # out of the filter
    assert f.apply([ddl("RENAME TABLE shop.old TO shop.new_t")]) == []  # into it
    assert f.apply([ddl("ALTER TABLE shop.gone RENAME TO shop.gone2", code=14)]) == []
    mixed = f.apply([ddl("RENAME TABLE shop.customers TO shop.new_c, shop.orders TO shop.o2, x.a TO x.b")])
    assert [e.query for e in mixed if isinstance(e, DdlEvent)] == [
        "RENAME TABLE `shop`.`customers` TO `shop`.`new_c`"]
    assert f.counts.ddl == {"renamed_out_of_filter": 2, "renamed_into_filter": 1, "not_included": 2}


@given(st.text(max_size=30))
def test_any_rule_text_parses_or_is_a_config_error(text: str) -> None:
    try:
        rule = parse_rule(text)
    except ConfigError:
        return
    rule.matches("s", "t")


def test_a_broadcast_ddl_is_counted_once() -> None:
    f = EventFilter(TableFilter(["shop.orders"]))
    copy = ddl("RENAME TABLE shop.orders TO shop.orders_v2")
    assert f.apply([copy]) == [] and f.apply([copy]) == []  # partition 0, partition 1
    assert f.counts.ddl == {"renamed_out_of_filter": 1}
