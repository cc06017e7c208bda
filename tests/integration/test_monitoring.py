"""The shipped monitoring (issue 41, item 5: watch the shards) against a real Prometheus.

promtool accepts deploy/prometheus/replicator-rules.yml and passes its unit tests. Then one shard
follower (`replicator run --shard 0/2 --metrics-port`, a process of its own) applies a simulated
stream with one undecodable message in it (`--on-error skip`) while a real Prometheus (Debian's
package from .cache/prometheus, started by the test) scrapes it every second and evaluates the
shipped rules with their `for:` cut to 1 s: Prometheus has its series, every query of the Grafana
dashboard returns data, the shard is behind (the simulated TSOs are from 2025) and has a dead
letter, and once the follower is stopped the shard-down alerts fire, naming the shard.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.prometheus_fixtures import (
    DASHBOARD,
    RULES,
    RULES_TEST,
    binary,
    free_port,
    rules_with_short_for,
    running_prometheus,
)
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import poll_until, wait_for

pytestmark = pytest.mark.integration

GARBAGE = b"\x00\x01not a TiCDC message\xff"
# Panels whose series exist only once something happened that this stream does not do.
MAY_BE_EMPTY = {"Delta conflict retries", "DDLs applied and skipped"}


def test_promtool_checks_and_tests_the_rules() -> None:
    promtool = binary("promtool")
    check = subprocess.run([str(promtool), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 7 rules found" in check.stdout, check.stdout
    unit = subprocess.run([str(promtool), "test", "rules", RULES_TEST.name], capture_output=True, text=True,
                          timeout=60, cwd=RULES_TEST.parent)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


def dashboard_queries(shard: str = ".*") -> list[tuple[str, str]]:
    """(panel title, PromQL) of every dashboard target, its variables filled as Grafana would: "All"
    (.*) or one shard."""
    subs = {"$__rate_interval": "15s", "$job": "replicator", "$shard": shard}
    out = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, val in subs.items():
                expr = expr.replace(var, val)
            out.append((panel["title"], expr))
    return out


def labels_of(alerts: list[dict[str, Any]], name: str) -> list[dict[str, str]]:
    return [a["labels"] for a in alerts if a["labels"]["alertname"] == name]


def test_prometheus_watches_a_shard(kafka_bootstrap: str, tmp_path: Path) -> None:
    sim = Simulation(SimConfig(protocol="open", seed=41, events=60, partitions=1, tables=2, ddl="none"))
    msgs = list(sim.messages())
    topic = new_topic(kafka_bootstrap, 1, prefix="monitoring")
    produce(kafka_bootstrap, topic, [*msgs[:2], (0, b"\x00" * 8, GARBAGE), *msgs[2:]])
    port = free_port()
    rules = rules_with_short_for(tmp_path / "rules.yml")
    log = tmp_path / "run.log"
    args = ("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
            "--warehouse", str(tmp_path / "wh"), "--on-error", "skip", "--shard", "0/2", "--metrics-port", str(port))
    with running_prometheus(tmp_path / "prometheus", [f"127.0.0.1:{port}"], [rules]) as prom:
        proc = start_replicator(*args, env=cli_env(), log=log)
        try:
            def scraped() -> bool:
                assert proc.poll() is None, f"the follower stopped:\n{tail(log)}"
                return (prom.value('sum(replicator_rows_total{job="replicator", table="shop.orders"})') or 0) > 0 \
                    and (prom.value('sum(replicator_dead_letters_total{job="replicator"})') or 0) >= 1
            wait_for("Prometheus to scrape the follower's rows and dead letter", scraped, timeout=240)
            assert prom.value('up{job="replicator"}') == 1
            # the shard applies its own table only (shop.customers is shard 1's)
            assert prom.value('sum(replicator_rows_total{table="shop.customers"})') is None
            info = prom.query('replicator_info{job="replicator"}')
            assert len(info) == 1 and info[0]["metric"]["source"] == topic, info
            shard = info[0]["metric"].get("shard")  # "0/2" once the series carry the shard label

            wait_for("the behind and dead-letter alerts to fire", lambda: {"ReplicatorShardBehind",
                     "ReplicatorDeadLetters"} <= {a["labels"]["alertname"] for a in prom.alerts()}, timeout=30)
            firing = prom.alerts()
            assert not labels_of(firing, "ReplicatorShardDown") and not labels_of(firing, "ReplicatorTargetDown")
            [dead] = labels_of(firing, "ReplicatorDeadLetters")
            assert dead["reason"] == "DecodeError" and dead.get("shard") == shard, dead
            [behind] = labels_of(firing, "ReplicatorShardBehind")
            assert behind.get("shard") == shard and behind["instance"] == f"127.0.0.1:{port}", behind

            # the dashboard's variables list this job and shard; its queries have data for "All"
            # and, when the series are sharded, for the one shard
            assert prom.label_values("job", "replicator_info") == ["replicator"]
            assert prom.label_values("shard", 'replicator_info{job=~"replicator"}') == ([shard] if shard else [])
            # (a rate needs two samples in its range: the rows may have come with the last scrape)
            empty: list[tuple[str, str]] = []

            def every_panel_has_data() -> bool:
                nonlocal empty
                empty = [(title, expr) for choice in [".*", *([shard] if shard else [])]
                         for title, expr in dashboard_queries(choice)
                         if title not in MAY_BE_EMPTY and not prom.query(expr)]
                return not empty
            poll_until(every_panel_has_data, 20, every=0.5)
            assert not empty, f"dashboard queries without data: {empty}"

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, tail(log)
        finally:
            if proc.poll() is None:
                kill_group(proc)

        def down() -> bool:
            names = {a["labels"]["alertname"] for a in prom.alerts()}
            return {"ReplicatorShardDown", "ReplicatorTargetDown"} <= names
        wait_for("the shard-down alerts to fire", down, timeout=30)
        firing = prom.alerts()
        [gone] = labels_of(firing, "ReplicatorShardDown")
        assert gone.get("shard") == shard and gone["source"] == topic and gone["job"] == "replicator", gone
        assert gone["severity"] == "critical"
        assert labels_of(firing, "ReplicatorTargetDown") == [
            {"alertname": "ReplicatorTargetDown", "instance": f"127.0.0.1:{port}", "job": "replicator",
             "severity": "critical"}]
        # a stopped shard's series are stale at once: it is no longer "behind", it is down
        assert not labels_of(firing, "ReplicatorShardBehind")
