"""The MERGE's key-range conjuncts and small-MERGE confs change what Delta reads and how, never
which rows match: the same change sets MERGEd into two tables, one always with the conjuncts and
without the small-MERGE confs, one with the small-table defaults (no conjuncts, small-MERGE confs),
leave both exactly as a plain model of the changes says. The compound key covers each type the
conjuncts bound (STRING, DATE, DECIMAL, INT)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.changes import Change
from replicator.delta.writer import SMALL_MERGE_CONF, TableWriter, key_range_predicate
from replicator.tables import ColumnSpec, TableSpec

pytestmark = pytest.mark.integration

SPEC = TableSpec("db", "kr", (
    ColumnSpec("s", "STRING", nullable=False), ColumnSpec("d", "DATE", nullable=False),
    ColumnSpec("m", "DECIMAL(10,2)", nullable=False), ColumnSpec("i", "INT", nullable=False),
    ColumnSpec("v", "STRING"),
), ("s", "d", "m", "i"))


def _key(n: int) -> tuple[Any, ...]:
    return (f"k{n % 7}-ü'{n}", dt.date(2024, 1, 1) + dt.timedelta(days=n % 11), Decimal(n % 13) / 4, n)


def _steps(rounds: int, seed: int = 7) -> list[list[Change]]:
    """Per step, collapsed changes (one per key) over a growing key space: upserts and deletes."""
    rnd = random.Random(seed)
    out = []
    for step in range(rounds):
        keys = rnd.sample(range(0, 40 + 20 * step), 25)
        out.append([Change(_key(n), True, None) if rnd.random() < 0.25 else
                    Change(_key(n), False, {**dict(zip(SPEC.key, _key(n), strict=True)), "v": f"v{step}-{n}"})
                    for n in keys])
    return out


def test_key_range_conjuncts_change_no_result(spark: Any, tmp_path: Path) -> None:
    """Also the small-MERGE confs: `forced` runs without them (Spark's adaptive plans, the
    session's shuffle partitions), `default` with them; both end as the model says, and the
    session's own settings are back after every MERGE."""
    forced, default = TableWriter(spark), TableWriter(spark)
    forced.key_range_min_bytes = 0
    forced.small_merge_conf = {}
    session = {k: spark.conf.get(k) for k in SMALL_MERGE_CONF}
    paths = {"forced": str(tmp_path / "forced"), "default": str(tmp_path / "default")}
    model: dict[tuple[Any, ...], str | None] = {}
    for applier, path in ((forced, paths["forced"]), (default, paths["default"])):
        applier.create_table(path, SPEC)
    for version, changes in enumerate(_steps(6), start=1):
        for ch in changes:
            if ch.delete:
                model.pop(ch.key, None)
            else:
                assert ch.image is not None
                model[ch.key] = ch.image["v"]
        assert key_range_predicate(SPEC, forced.source_table(SPEC, changes)).count(" AND ") == 7  # 4 columns, 2 bounds
        for applier, path in ((forced, paths["forced"]), (default, paths["default"])):
            size = applier.cached_size_bytes(path)
            assert applier.prunes_by_key_range(size) is (applier is forced)
            assert (applier.conf_for(size, len(changes)).items() >= SMALL_MERGE_CONF.items()) is (applier is default)
            res = applier.merge(path, "kr", SPEC, changes, version, {"step": version})
            assert not res.skipped
            assert {k: spark.conf.get(k) for k in SMALL_MERGE_CONF} == session
    for path in paths.values():
        rows = {(r["s"], r["d"], r["m"], r["i"]): r["v"] for r in spark.read.format("delta").load(path).collect()}
        assert rows == model
