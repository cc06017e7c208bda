"""Exploration API and the notebook, against a warehouse this test builds from a known stream."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.explore import open_warehouse
from tests.integration.helpers import produce_stream, run_engine
from tests.kafka_fixtures import new_topic
from tests.streamgen import SCHEMA, Stream, generate

pytestmark = pytest.mark.integration
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "explore.ipynb"


@pytest.fixture(scope="module")
def built(kafka_bootstrap: str, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Stream]:
    stream = generate(seed=21, n_txn=300, n_partitions=3, n_tables=3, truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 3)
    produce_stream(kafka_bootstrap, topic, stream.partitions, "open")
    wh = tmp_path_factory.mktemp("explore") / "wh"
    # several steps (no spilling): intermediate watermarks
    run_engine(kafka_bootstrap, topic, wh, spark, max_buffer_rows=250, spill_rows=0)
    return wh, stream


def _rows(df: Any) -> dict[int, dict[str, Any]]:
    return {r["id"]: r.asDict() for r in df.collect()}


def test_consistent_snapshot_equals_upstream_state_at_intermediate_watermarks(built: Any, spark: Any) -> None:
    wh, stream = built
    ex = open_warehouse(wh, spark)
    wms = ex.watermarks()
    assert len(wms) >= 4, "the run should have applied several steps"
    for w in (wms[1], wms[len(wms) // 2], wms[-2], wms[-1]):
        expected = stream.state_at(w)
        snap = ex.snapshot(w)
        for table in stream.tables:
            name = f"{SCHEMA}.{table}"
            got = _rows(snap[name]) if name in snap else {}
            assert got == expected[table], f"{name} as of {w}"


def test_tables_history_and_changes(built: Any, spark: Any) -> None:
    wh, stream = built
    ex = open_warehouse(wh, spark)
    overview = ex.tables()
    assert sorted(overview["table"]) == stream.tables
    assert dict(zip(overview["table"], overview["rows"], strict=True)) == {
        t: len(stream.expected[t]) for t in stream.tables}
    hist = ex.history(f"{SCHEMA}.t0")
    merges = hist[hist["operation"] == "MERGE"]
    assert len(merges) >= 2 and merges["step"].notna().all() and (merges["kind"] == "window").all()
    assert (hist[hist["operation"] == "CREATE TABLE"]["kind"] == "ddl").all()
    wms = ex.watermarks()
    lo, hi = wms[1], wms[-1]
    changes = ex.changes(f"{SCHEMA}.t0", lo, hi).collect()
    before, after = stream.state_at(lo)["t0"], stream.state_at(hi)["t0"]
    inserted = {r["id"] for r in changes if r["_change_type"] == "insert"}
    deleted = {r["id"] for r in changes if r["_change_type"] == "delete"}
    # Every key present at hi but not at lo was inserted; every key gone was deleted.
    assert set(after) - set(before) <= inserted
    assert set(before) - set(after) <= deleted


def test_notebook_runs_headless_and_shows_the_truth(built: Any) -> None:
    import nbclient
    import nbformat

    wh, stream = built
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env_before = os.environ.get("REPLICATOR_WAREHOUSE")
    os.environ["REPLICATOR_WAREHOUSE"] = str(wh)
    try:
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        client.execute()
    finally:
        if env_before is None:
            os.environ.pop("REPLICATOR_WAREHOUSE", None)
        else:
            os.environ["REPLICATOR_WAREHOUSE"] = env_before
    text, pngs = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append(out["text"])
            data = out.get("data", {})
            if "image/png" in data:
                assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
                pngs += 1
    stdout = "".join(text)
    for t in stream.tables:
        assert f"TABLE {SCHEMA}.{t} rows={len(stream.expected[t])} key=id" in stdout
    w = int(re.search(r"SNAPSHOT_AT (\d+)", stdout).group(1))  # type: ignore[union-attr]
    expected = stream.state_at(w)
    for t in stream.tables:
        if expected[t]:
            assert f"SNAPSHOT {SCHEMA}.{t} rows={len(expected[t])}" in stdout
    assert "CHANGES shop.t0" in stdout and "TIMETRAVEL shop.t0" in stdout
    assert pngs >= 1
