"""A real Prometheus server for the monitoring tests: Debian's `prometheus` package unpacked into
.cache/prometheus by `make prometheus` (part of `make setup`, so of `make test`), started and
stopped by the test itself on 127.0.0.1, with its own config, rules and storage in a temp dir.

A missing binary fails the test saying how to get it; it never skips.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import poll_until

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".cache" / "prometheus" / "usr" / "bin"
RULES = REPO / "deploy" / "prometheus" / "replicator-rules.yml"
RULES_TEST = REPO / "deploy" / "prometheus" / "replicator-rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "replicator.json"


def binary(name: str) -> Path:
    """`prometheus` or `promtool` from .cache/prometheus; the test fails when it is missing."""
    path = BIN / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make prometheus` (part of `make setup` and `make test`; "
                    f"it unpacks Debian's prometheus package there, see tools/prometheus/fetch.sh)", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rules_with_short_for(target: Path, duration: str = "1s") -> Path:
    """The shipped rules with every `for:` cut to `duration`, so that a test sees alerts fire in seconds."""
    text, n = re.subn(r"(?m)^(\s+for:) \S+$", rf"\1 {duration}", RULES.read_text())
    assert n > 0, f"no `for:` in {RULES}"
    target.write_text(text)
    return target


class Prometheus:
    """A running server: its HTTP API at `url`."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.proc = proc
        self.log = log

    def _get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: [{"metric": {labels}, "value": [time, "value"]}, ...]."""
        data = self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The single sample of `expr` (None when it has none)."""
        result = self.query(expr)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None

    def label_values(self, label: str, match: str) -> list[str]:
        """What Grafana's `label_values(match, label)` lists."""
        return list(self._get(f"/api/v1/label/{label}/values", **{"match[]": match}))

    def alerts(self, state: str = "firing") -> list[dict[str, Any]]:
        """The alerts in `state` (pending or firing), each {"labels", "annotations", "state", ...}."""
        return [a for a in self._get("/api/v1/alerts")["alerts"] if a["state"] == state]

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


@contextlib.contextmanager
def running_prometheus(workdir: Path, targets: list[str], rule_files: list[Path], *, job: str = "replicator",
                       interval: str = "1s") -> Iterator[Prometheus]:
    """Prometheus scraping `targets` (host:port) as `job` every `interval` and evaluating `rule_files`
    as often; stopped (and reaped) on exit."""
    exe = binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}],
    }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(json.dumps(config, indent=2))  # JSON is YAML
    port = free_port()
    log = workdir / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), f"--config.file={config_file}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True)
    server = Prometheus(f"http://127.0.0.1:{port}", proc, log)

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {proc.returncode}:\n{server.tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as resp:
            if resp.status == 200:
                return True
        return False

    try:
        if not poll_until(ready, 30, every=0.1):
            raise AssertionError(f"prometheus not ready after 30 s:\n{server.tail()}")
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
