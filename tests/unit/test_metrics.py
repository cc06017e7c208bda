"""The run's Prometheus metrics (replicator/metrics.py): names, labels, bounds, export."""

from __future__ import annotations

import math
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.errors import ConfigError
from replicator.events import TP
from replicator.metrics import METRICS, OTHER_TABLE, Metrics, render_markdown


def make_tso(physical_ms: int) -> int:
    """A TiDB TSO: physical milliseconds above 18 logical bits."""
    return physical_ms << 18


def samples(text: bytes | str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    if isinstance(text, bytes):
        text = text.decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def families(text: bytes) -> dict[str, str]:
    return {fam.name: fam.type for fam in text_string_to_metric_families(text.decode())}


def test_every_listed_metric_is_exported_with_its_type() -> None:
    m = Metrics(protocol="craft", reader="driver", source="t")
    m.merged("s.t", inserted=1, updated=0, deleted=0, committed=True)
    m.ddl(3, "create table", ["s.t"], applied=True)
    m.ddl(5, "add column", [], applied=False)
    m.dead_lettered(["DecodeError"], decode_errors=1)
    m.step("window", 0.5)
    m.kafka_lags({TP("t", 0): 3})
    with m.table_context("s.t"):
        m.conflict_retry()
    exported = families(m.text())
    for name, (kind, _labels, _help) in METRICS.items():
        if name == "replicator_run_success":
            continue  # textfile only
        family = name.removesuffix("_total") if kind == "counter" else name
        assert exported.get(family) == kind, name
    assert set(exported) <= {n.removesuffix("_total") if METRICS[n][0] == "counter" else n for n in METRICS}


def test_counts_and_labels() -> None:
    m = Metrics(protocol="open", reader="spark", source="topic-a")
    m.merged("shop.orders", inserted=5, updated=2, deleted=1, committed=True)
    m.merged("shop.orders", inserted=0, updated=0, deleted=0, committed=False)  # skipped (already committed)
    m.ddl(14, "truncate table", ["shop.orders"], applied=True)
    m.dead_lettered(["DecodeError", "UnsupportedError"], decode_errors=2)
    m.dead_lettered(["DdlError"], decode_errors=0)
    m.records_read(10)
    m.records_read(25)
    m.records_read(20)  # never backwards
    s = samples(m.text())
    assert s[("replicator_info", (("protocol", "open"), ("reader", "spark"), ("source", "topic-a"),
                                  ("version", __import__("replicator").__version__)))] == 1
    assert s[("replicator_rows_total", (("op", "insert"), ("table", "shop.orders")))] == 5
    assert s[("replicator_rows_total", (("op", "update"), ("table", "shop.orders")))] == 2
    assert s[("replicator_rows_total", (("op", "delete"), ("table", "shop.orders")))] == 1
    assert s[("replicator_delta_commits_total", (("kind", "merge"), ("table", "shop.orders")))] == 1
    assert s[("replicator_delta_commits_total", (("kind", "ddl"), ("table", "shop.orders")))] == 1
    assert s[("replicator_ddl_applied_total", (("name", "truncate table"), ("type", "14")))] == 1
    assert s[("replicator_dead_letters_total", (("reason", "DecodeError"),))] == 1
    assert s[("replicator_dead_letters_total", (("reason", "DdlError"),))] == 1
    assert s[("replicator_decode_errors_total", ())] == 2
    assert s[("replicator_records_total", ())] == 25
    assert s[("replicator_up", ())] == 1


def test_table_labels_are_bounded() -> None:
    m = Metrics(max_tables=2)
    for i in range(5):
        m.merged(f"s.t{i}", inserted=1, updated=0, deleted=0, committed=True)
    m.merged("s.t0", inserted=1, updated=0, deleted=0, committed=True)  # a labelled table stays labelled
    s = samples(m.text())
    inserted = {dict(labels)["table"]: v for (name, labels), v in s.items()
                if name == "replicator_rows_total" and dict(labels)["op"] == "insert"}
    assert inserted == {"s.t0": 2, "s.t1": 1, OTHER_TABLE: 3}
    with pytest.raises(ConfigError):
        Metrics(max_tables=-1)


def test_lags_follow_the_watermarks() -> None:
    m = Metrics()
    assert math.isnan(samples(m.text())[("replicator_checkpoint_lag_seconds", ())])  # nothing applied yet
    now_ms = int(time.time() * 1000)
    m.watermarks(make_tso(now_ms - 60_000), make_tso(now_ms - 10_000))
    s = samples(m.text())
    assert 59 <= s[("replicator_checkpoint_lag_seconds", ())] < 120
    assert s[("replicator_resolved_lag_seconds", ())] == pytest.approx(50.0)
    assert s[("replicator_checkpoint_timestamp_seconds", ())] == pytest.approx((now_ms - 60_000) / 1000)
    m.watermarks(make_tso(now_ms - 10_000), 0)  # caught up to the newest resolved event seen
    s = samples(m.text())
    assert s[("replicator_resolved_lag_seconds", ())] == 0
    assert s[("replicator_checkpoint_lag_seconds", ())] < 59


def test_endpoint_and_textfile(tmp_path: Path) -> None:
    m = Metrics(protocol="craft")
    port = m.serve("127.0.0.1", 0)
    m.step("window", 1.5)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        served = samples(resp.read())
    assert served[("replicator_steps_total", (("kind", "window"),))] == 1
    assert served[("replicator_step_duration_seconds_count", (("kind", "window"),))] == 1
    target = tmp_path / "replicator.prom"
    m.finish(success=True, textfile=str(target))
    written = samples(target.read_text())
    assert written[("replicator_run_success", ())] == 1
    assert written[("replicator_up", ())] == 0
    assert written[("replicator_steps_total", (("kind", "window"),))] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["replicator.prom"]  # no temporary file left
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    with pytest.raises(ConfigError, match="does not exist"):
        Metrics().finish(success=False, textfile=str(tmp_path / "missing" / "x.prom"))


def test_a_taken_port_is_a_config_error() -> None:
    first = Metrics()
    port = first.serve("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError, match="--metrics-port"):
            Metrics().serve("127.0.0.1", port)
    finally:
        first.finish(success=True, textfile=None)


def test_monitoring_page_lists_the_metrics() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    assert render_markdown() in page, "docs/monitoring.md's metric table is stale: paste render_markdown()"


def test_sharded_run_labels_every_series_and_unsharded_has_no_shard_label(tmp_path: Path) -> None:
    """--shard I/N: `shard="I/N"` on every sample (served and in the textfile); unsharded: none,
    the exposition exactly as before."""
    plain, sharded = Metrics(protocol="open"), Metrics(protocol="open", shard="1/3")
    for m in (plain, sharded):
        m.merged("shop.orders", inserted=2, updated=1, deleted=0, committed=True)
        m.step("window", 0.2)
        m.watermarks(443_000_000_000_000_000, 443_000_000_000_000_000)
    plain_text, sharded_text = plain.text().decode(), sharded.text().decode()
    assert "shard=" not in plain_text
    lines = [ln for ln in sharded_text.splitlines() if ln and not ln.startswith("#")]
    assert lines and all('shard="1/3"' in ln for ln in lines)
    # the same series otherwise: dropping the label gives the unsharded series back
    unlabelled = {(name, tuple(kv for kv in labels if kv[0] != "shard")) for name, labels in samples(sharded_text)}
    assert unlabelled == set(samples(plain_text))
    out = tmp_path / "m.prom"
    sharded.finish(success=True, textfile=str(out))
    assert 'replicator_run_success{shard="1/3"} 1.0' in out.read_text()
