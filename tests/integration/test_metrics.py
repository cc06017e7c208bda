"""Prometheus metrics of a follower and of a scheduled job (issue 32, parts 1 and 2).

A follower (`replicator run --metrics-port`, a process of its own) applies a simulated stream in
two bursts, one undecodable message among them (`--on-error skip`), while this test scrapes its
endpoint. Relations only, no timed asserts: the Kafka lag rises when a burst arrives faster than
the follower applies it and falls back to 0 as it catches up; the applied watermark never goes
back; the checkpoint lag is now minus the applied watermark's time. After SIGTERM the textfile it
wrote at exit equals its JSON summary counter by counter, and the rows the metrics say were
inserted less those deleted are exactly the simulator's expected tables.
A scheduled job's textfile (`--until-caught-up --metrics-textfile`) equals its summary; one that
stops on a corrupt message writes it all the same: the dead letter counted, run_success 0.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.cli import main
from replicator.codec import codec_for
from replicator.events import Resolved
from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration

GARBAGE = b"\x00\x01not a TiCDC message\xff"
Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Samples:
    out: Samples = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((dict(s.labels), s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def last_resolved(messages: list[tuple[int, bytes | None, bytes]], partitions: int) -> list[int]:
    """Each partition's newest resolved ts in these messages."""
    codec = codec_for("open")
    newest = dict.fromkeys(range(partitions), 0)
    for p, key, val in messages:
        for ev in codec.decode(key, val):
            if isinstance(ev, Resolved):
                newest[p] = max(newest[p], ev.ts)
    return list(newest.values())


def watermark_of(messages: list[tuple[int, bytes | None, bytes]], partitions: int) -> int:
    """The global resolved ts after these messages: min over partitions of their newest resolved."""
    return min(last_resolved(messages, partitions))


class Scraper(threading.Thread):
    """Scrapes the endpoint every 0.1 s: (monotonic time, wall time, samples)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.seen: list[tuple[float, float, Samples]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=5) as resp:
                    assert resp.headers["Content-Type"].startswith("text/plain")
                    body = resp.read().decode()
                self.seen.append((time.monotonic(), time.time(), parse(body)))
            except OSError:
                pass  # not serving yet, or already gone
            self.stop.wait(0.1)

    def since(self, t: float) -> list[Samples]:
        return [s for at, _wall, s in list(self.seen) if at >= t]


def kafka_lag(s: Samples) -> float:
    return value(s, "replicator_kafka_consumer_lag_messages")


def test_follower_metrics_and_textfile(kafka_bootstrap: str, tmp_path: Path) -> None:
    # DDLs that keep every row (a TRUNCATE or DROP would remove rows no MERGE deleted: see the last check)
    sim = Simulation(SimConfig(protocol="open", seed=32, events=300, partitions=2, tables=2,
                               ddl="add_column"))
    msgs = list(sim.messages())
    half = len(msgs) // 2
    first, second = msgs[:half], msgs[half:]
    p0 = [i for i, m in enumerate(first) if m[0] == 0]
    at = p0[len(p0) // 2]
    topic = new_topic(kafka_bootstrap, 2, prefix="metrics")
    produce(kafka_bootstrap, topic, [*first[:at], (0, b"\x00" * 8, GARBAGE), *first[at:]])
    w_first = watermark_of(first, 2)
    expected = sim.expected
    wh, log, prom, out = tmp_path / "wh", tmp_path / "run.log", tmp_path / "run.prom", tmp_path / "summary.json"
    port = free_port()
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
    proc = start_replicator("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                            "--warehouse", str(wh), "--on-error", "skip", "--max-buffer-rows", "50",
                            "--spill-rows", "0",
                            "--metrics-port", str(port), "--metrics-textfile", str(prom), "--json-summary",
                            env=cli_env(), log=log, stdout=out)
    scraper.start()
    try:
        wait_for("the follower to apply the first burst",
                 lambda: proc.poll() is not None or applied_ts(wh) >= w_first, timeout=240)
        assert proc.poll() is None, f"the follower stopped:\n{tail(log)}"
        wait_for("the Kafka lag gauge to reach 0", lambda: bool(scraper.seen) and any(
            "replicator_kafka_consumer_lag_messages" in s and kafka_lag(s) == 0 for s in scraper.since(0)),
            timeout=60)
        idle = time.monotonic()
        time.sleep(1.0)
        produce(kafka_bootstrap, topic, second)  # input faster than the follower applies it
        wait_for("the follower to apply the second burst",
                 lambda: proc.poll() is not None or applied_ts(wh) >= expected.watermark, timeout=240)
        assert proc.poll() is None, f"the follower stopped:\n{tail(log)}"
        wait_for("the Kafka lag gauge to fall back to 0",
                 lambda: kafka_lag(scraper.since(idle)[-1]) == 0 if scraper.since(idle) else False, timeout=60)
        # The state file is written by the commit; the gauges follow just after it, on the loop's thread.
        final_ts = (applied_ts(wh) >> 18) / 1000
        wait_for("the checkpoint gauge to show the final watermark", lambda: bool(scraper.seen) and value(
            scraper.seen[-1][2], "replicator_checkpoint_timestamp_seconds") >= final_ts, timeout=60)
        scraper.stop.set()
        scraper.join(timeout=10)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, tail(log)
    finally:
        scraper.stop.set()
        if proc.poll() is None:
            kill_group(proc)

    seen = [s for _at, _wall, s in scraper.seen]
    assert len(seen) >= 10, "the endpoint did not answer while the follower ran"
    # Lag rose when the second burst arrived faster than it was applied, then fell back to 0.
    lags = [kafka_lag(s) for s in scraper.since(idle)]
    assert lags and lags[0] == 0 and max(lags) > 0 and lags[-1] == 0, lags
    # The applied watermark never moves back; the checkpoint lag is now minus its time.
    stamps = [value(s, "replicator_checkpoint_timestamp_seconds") for s in seen]
    assert stamps == sorted(stamps)
    for _at, wall, s in scraper.seen:
        ts, lag = value(s, "replicator_checkpoint_timestamp_seconds"), value(s, "replicator_checkpoint_lag_seconds")
        if ts:
            assert abs((wall - ts) - lag) < 5.0, (wall, ts, lag)
        else:
            assert math.isnan(lag)
    # Caught up with what it read: the applied watermark is the oldest partition's newest resolved ts.
    assert value(seen[-1], "replicator_resolved_lag_seconds") == pytest.approx(
        (max(last_resolved(msgs, 2)) >> 18) / 1000 - (expected.watermark >> 18) / 1000, abs=0.002)
    assert value(seen[-1], "replicator_up") == 1
    assert value(seen[-1], "replicator_info", protocol="open", reader="driver", source=topic) == 1

    summary: dict[str, Any] = json.loads(out.read_text())
    final = parse(prom.read_text())
    assert value(final, "replicator_up") == 0 and value(final, "replicator_run_success") == 1
    assert value(final, "replicator_records_total") == summary["records"] == len(msgs) + 1
    assert value(final, "replicator_steps_total") == summary["steps"] > 2, summary
    assert value(final, "replicator_step_duration_seconds_count") == summary["steps"]
    assert value(final, "replicator_dead_letters_total", reason="DecodeError") == summary["dead_letters"] == 1
    assert value(final, "replicator_decode_errors_total") == 1
    assert value(final, "replicator_ddl_applied_total") == summary["ddl_applied"] > 0
    assert {lab["partition"]: v for lab, v in final["replicator_kafka_consumer_lag_messages"]} == {"0": 0, "1": 0}
    assert value(final, "replicator_checkpoint_timestamp_seconds") == pytest.approx(
        (expected.watermark >> 18) / 1000) or applied_ts(wh) > expected.watermark
    for name, counts in summary["tables"].items():
        for op, key in (("insert", "inserted"), ("update", "updated"), ("delete", "deleted")):
            assert value(final, "replicator_rows_total", table=name, op=op) == counts[key], (name, op)
        assert value(final, "replicator_delta_commits_total", table=name, kind="merge") >= 1
    # Independently: what the MERGEs did adds up to the simulator's expected tables.
    for name, rows in expected.tables.items():
        live = (value(final, "replicator_rows_total", table=name, op="insert")
                - value(final, "replicator_rows_total", table=name, op="delete"))
        assert live == len(rows), name


def test_scheduled_job_textfile(kafka_bootstrap: str, tmp_path: Path, spark: Any,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduled job's textfile matches its summary; one that stops on a corrupt message still
    writes it, with the dead letter counted and run_success 0."""
    sim = Simulation(SimConfig(protocol="open", seed=7, events=120, partitions=1, tables=1, ddl="none"))
    msgs = list(sim.messages())
    topic = new_topic(kafka_bootstrap, 1, prefix="metrics-job")
    produce(kafka_bootstrap, topic, [*msgs[:len(msgs) // 2], (0, None, GARBAGE), *msgs[len(msgs) // 2:]])
    base = ["run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open", "--until-caught-up"]

    prom = tmp_path / "job.prom"
    capsys.readouterr()
    assert main([*base, "--warehouse", str(tmp_path / "wh"), "--on-error", "skip", "--json-summary",
                 "--metrics-textfile", str(prom)]) == 0
    summary = json.loads(capsys.readouterr().out)
    final = parse(prom.read_text())
    assert value(final, "replicator_run_success") == 1 and value(final, "replicator_up") == 0
    assert value(final, "replicator_records_total") == summary["records"] == len(msgs) + 1
    assert value(final, "replicator_steps_total") == summary["steps"] >= 1
    assert value(final, "replicator_dead_letters_total", reason="DecodeError") == summary["dead_letters"] == 1
    assert value(final, "replicator_ddl_applied_total") == summary["ddl_applied"]
    assert value(final, "replicator_checkpoint_timestamp_seconds") == (summary["watermark_tso"] >> 18) / 1000
    for name, counts in summary["tables"].items():
        for op, key in (("insert", "inserted"), ("update", "updated"), ("delete", "deleted")):
            assert value(final, "replicator_rows_total", table=name, op=op) == counts[key], (name, op)
        assert counts["inserted"] - counts["deleted"] == len(sim.expected.tables[name])

    failed = tmp_path / "failed.prom"
    code = main([*base, "--warehouse", str(tmp_path / "wh2"), "--metrics-textfile", str(failed)])
    err = capsys.readouterr().err
    assert code != 0 and "offset" in err  # stopped at the corrupt message, naming its position
    final = parse(failed.read_text())
    assert value(final, "replicator_run_success") == 0 and value(final, "replicator_up") == 0
    assert value(final, "replicator_dead_letters_total", reason="DecodeError") == 1
    assert value(final, "replicator_decode_errors_total") == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".prom" or ".prom." in p.name) == [
        "failed.prom", "job.prom"]  # no temporary file left
