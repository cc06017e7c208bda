"""The spec a table's spilled rows are decoded under as they are spilled (engine/pipeline.py
`spill_spec`): the catalog's; else its CREATE TABLE still in the buffer; else what a step infers
from the row; none for a table without a key."""

from __future__ import annotations

from replicator.delta.typemap import spec_from_row
from replicator.engine.pipeline import spill_spec
from replicator.events import Column, DdlCode, DdlEvent, Flag, Op, RowChange, TypeCode
from replicator.tables import ColumnSpec, TableSpec
from replicator.warehouse import State
from replicator.warehouse.store import TableEntry

T = ("shop", "orders")
CREATE = DdlEvent(5, "shop", "orders", DdlCode.CREATE_TABLE,
                  "CREATE TABLE `orders` (`id` BIGINT PRIMARY KEY, `price` DECIMAL(10,2), `note` VARCHAR(20))")


def _row(ts: int = 10, flags: int = Flag.HANDLE_KEY) -> RowChange:
    return RowChange(ts, "shop", "orders", Op.INSERT, (Column("id", TypeCode.LONGLONG, flags, 1),
                                                        Column("price", TypeCode.NEWDECIMAL, 0, "1.50"),
                                                        Column("note", TypeCode.VARCHAR, 0, "x")))


def test_the_catalogs_spec_first() -> None:
    spec = TableSpec("shop", "orders", (ColumnSpec("id", "bigint"), ColumnSpec("price", "decimal(12,3)")), ("id",))
    state = State()
    state.tables["u"] = TableEntry(uid="u", schema="shop", table="orders", path="/p", spec=spec.to_json())
    assert spill_spec(state, [CREATE], T, _row()) == spec


def test_a_create_table_still_buffered_before_the_row_then_the_rows_own_types() -> None:
    planned = spill_spec(State(), [CREATE], T, _row())
    assert planned is not None and planned.key == ("id",)
    assert [c.spark_type.lower() for c in planned.columns] == ["bigint", "decimal(10,2)", "string"]
    inferred = spill_spec(State(), [CREATE], T, _row(ts=4))  # created after this row: not its spec
    assert inferred == spec_from_row(_row(ts=4)) and inferred != planned
    assert spill_spec(State(), [], T, _row()) == spec_from_row(_row())


def test_a_table_without_a_key_is_not_decoded_ahead() -> None:
    assert spill_spec(State(), [], T, _row(flags=0)) is None
