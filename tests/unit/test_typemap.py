"""TiDB -> Delta type mapping and value conversion (pure)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from replicator.delta.typemap import converter_for, spec_from_create
from replicator.errors import SchemaError
from replicator.tables import ColumnSpec


def test_wide_decimals_convert_exactly() -> None:
    conv = converter_for(ColumnSpec("x", "DECIMAL(38,10)"))
    big = Decimal("9999999999999999999999999999.9999999999")
    assert conv(big) == big
    assert conv(Decimal("1.5")) == Decimal("1.5000000000")
    assert conv(18446744073709551615) == Decimal(18446744073709551615)
    with pytest.raises(SchemaError, match="without rounding"):
        conv(Decimal("1.00000000001"))
    with pytest.raises(SchemaError):
        converter_for(ColumnSpec("u", "DECIMAL(20,0)"))(Decimal("1e40"))


def test_create_table_mapping() -> None:
    spec = spec_from_create(
        "CREATE TABLE s.t (id BIGINT UNSIGNED PRIMARY KEY, d DECIMAL(65,30), p DECIMAL(12,2), e ENUM('a','b'), "
        "st SET('x','y'), ts TIMESTAMP(3), dtm DATETIME(6), tm TIME, b BIT(64), vb VARBINARY(8), j JSON)", "s")
    types = {c.name: c.spark_type for c in spec.columns}
    assert types == {"id": "DECIMAL(20,0)", "d": "STRING", "p": "DECIMAL(12,2)", "e": "STRING", "st": "STRING",
                     "ts": "TIMESTAMP", "dtm": "TIMESTAMP_NTZ", "tm": "STRING", "b": "DECIMAL(20,0)",
                     "vb": "BINARY", "j": "STRING"}
    assert spec.key == ("id",)
    e = spec.column("e")
    st = spec.column("st")
    assert e is not None and st is not None
    assert converter_for(e)(2) == "b" and converter_for(e)(0) == ""
    assert converter_for(st)(3) == "x,y" and converter_for(st)(0) == ""
