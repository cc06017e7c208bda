"""The shipped Grafana dashboard and Prometheus rules (deploy/) stay true to the metrics and docs:
only metrics replicator/metrics.py defines, every query filtered by the job and shard variables,
the datasource a variable, panels that do not overlap, every alert documented where its
description points. (Prometheus itself runs them in tests/integration/test_monitoring.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from replicator.metrics import METRICS

REPO = Path(__file__).resolve().parent.parent.parent
DASHBOARD = REPO / "deploy" / "grafana" / "replicator.json"
RULES = REPO / "deploy" / "prometheus" / "replicator-rules.yml"
DOCS = REPO / "docs" / "monitoring.md"
DS = {"type": "prometheus", "uid": "${datasource}"}


def known(name: str) -> bool:
    if name in METRICS:
        return True
    base, _, suffix = name.rpartition("_")
    return suffix in ("bucket", "sum", "count") and METRICS.get(base, ("",))[0] == "histogram"


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def targets() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]


def test_dashboard_variables() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert set(variables) == {"datasource", "job", "shard"}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("job", "shard"):
        v = variables[name]
        assert v["type"] == "query" and v["datasource"] == DS
        # "All" is a regex matching any value, and no label at all (an unsharded run has no shard label)
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"
    assert variables["shard"]["query"] == 'label_values(replicator_info{job=~"$job"}, shard)'


def test_dashboard_panels_read_the_datasource_variable_and_do_not_overlap() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]
        if p["type"] != "row":
            assert p["datasource"] == DS, p["title"]
            assert p["targets"] and all(t["datasource"] == DS for t in p["targets"]), p["title"]


def test_dashboard_has_the_per_shard_panels() -> None:
    by_title: dict[str, str] = {}
    for title, expr in targets():
        by_title[title] = by_title.get(title, "") + expr + "\n"
    for title, metric in [("Checkpoint lag per shard", "replicator_checkpoint_lag_seconds"),
                          ("Kafka consumer lag per shard", "replicator_kafka_consumer_lag_messages"),
                          ("Rows per table", "replicator_rows_total"),
                          ("Commits per table", "replicator_delta_commits_total"),
                          ("Step time per shard", "replicator_step_duration_seconds_bucket"),
                          ("Dead letters per shard", "replicator_dead_letters_total")]:
        assert metric in by_title[title] and "by (shard" in by_title[title], title


def test_dashboard_queries_use_real_metrics_filtered_by_job_and_shard() -> None:
    for title, expr in targets():
        names = re.findall(r"\b(replicator_[a-z_]+)", expr)
        assert names or "ALERTS" in expr, title
        for name in names:
            assert known(name), f"{title}: {name} is not in replicator/metrics.py"
        # every selector of a replicator metric (or of ALERTS) is filtered by both variables
        for selector in re.findall(r"\b(?:replicator_[a-z_]+|ALERTS)(\{[^}]*\})?", expr):
            assert 'job=~"$job"' in selector and 'shard=~"$shard"' in selector, (title, expr)


def test_rules_use_real_metrics_and_are_documented() -> None:
    rules = RULES.read_text()
    for name in set(re.findall(r"\b(replicator_[a-z_]+)", rules)):
        assert known(name), f"{name} in {RULES.name} is not in replicator/metrics.py"
    alerts = re.findall(r"(?m)^\s+- alert: (\w+)$", rules)
    assert {"ReplicatorShardBehind", "ReplicatorShardDown", "ReplicatorDeadLetters"} <= set(alerts)
    docs = DOCS.read_text()
    headings = set(re.findall(r"(?m)^#### (\w+)$", docs))
    for alert in alerts:
        assert alert in headings, f"docs/monitoring.md has no '#### {alert}'"
        assert f"docs/monitoring.md#{alert.lower()}" in rules, f"{alert}'s description does not point at its docs"
    for doc_path in ("deploy/prometheus/replicator-rules.yml", "deploy/grafana/replicator.json"):
        assert doc_path in docs
