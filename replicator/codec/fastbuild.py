"""Decoded rows built without a frozen dataclass's per-field `object.__setattr__` calls: the
binary and JSON decoders (Craft, canal-json) fill slotted twins and retype them to the event
model's classes. Pure; shared by the codecs, so it lives below them.
"""

from __future__ import annotations

from typing import Any

from replicator.events import Column, Op, Position, RowChange, Value

__all__ = ["COLUMN_CLS", "ROW_CLS", "ColumnTwin", "RowTwin", "new_object"]


# Building a frozen dataclass costs one `object.__setattr__` call per field. The decoder instead
# fills a plain slotted twin with the same slot layout (fast attribute stores) and then retypes
# it with `__class__ =`, which CPython permits exactly when the layouts are identical; the
# result is an ordinary Column / RowChange. If the model's layout ever changes, the import-time
# probe below fails and the decoder falls back to the public constructors.
class ColumnTwin:
    __slots__ = ("flags", "name", "type_code", "value")
    name: str
    type_code: int
    flags: int
    value: Value


class RowTwin:
    __slots__ = (
        "claim_check",
        "columns",
        "commit_ts",
        "old_columns",
        "only_handle_key",
        "op",
        "partition_id",
        "position",
        "row_id",
        "schema",
        "table",
    )
    commit_ts: int
    schema: str
    table: str
    op: Op
    columns: tuple[Column, ...]
    old_columns: tuple[Column, ...]
    partition_id: int | None
    row_id: int | None
    only_handle_key: bool
    claim_check: str | None
    position: Position | None


new_object = object.__new__


def _retype_probe() -> tuple[type[Any], type[Any]]:
    """(class decoded columns get, class decoded rows get): the model's, or the twins if refused."""
    column_cls: type[Any] = Column
    row_cls: type[Any] = RowChange
    col: Any = new_object(ColumnTwin)
    col.name, col.type_code, col.flags, col.value = "c", 1, 0, None
    try:
        col.__class__ = Column
        if col != Column("c", 1, 0, None):
            column_cls = ColumnTwin
    except TypeError:
        column_cls = ColumnTwin
    row: Any = new_object(RowTwin)
    row.commit_ts, row.schema, row.table, row.op = 1, "s", "t", Op.INSERT
    row.columns = row.old_columns = ()
    row.partition_id = row.row_id = row.claim_check = row.position = None
    row.only_handle_key = False
    try:
        row.__class__ = RowChange
        if row != RowChange(1, "s", "t", Op.INSERT):
            row_cls = RowTwin
    except TypeError:
        row_cls = RowTwin
    return column_cls, row_cls


COLUMN_CLS, ROW_CLS = _retype_probe()
