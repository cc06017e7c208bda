"""Section "follower": how far behind a following replicator stays under a steady input.

A live stream into a new topic: `follower_rate` row changes/s (500 by default) over
`follower_tables` tables (10), every row's commit ts the current TSO (physical part = now), a
resolved event on every partition every second, for `follower_seconds` (3 minutes; ``--quick``
25 s). The rows are the simulator's (its tables, value mix and transactions, at-least-once replays
left out), re-stamped with live commit timestamps as they are sent; a transaction is never split
across a resolved event. ``replicator run`` without ``--until-caught-up`` follows the topic as a
subprocess, started after the tables' CREATE TABLE steps are in the topic and applied (so JVM
start-up is not counted as lag), and is stopped with SIGTERM once it has applied the last resolved
ts (it finishes its step and exits).

Lag of a row = the Delta commit time of the first MERGE into its table whose step reached the row's
commit ts (each MERGE commit carries its step's upper commit ts in its ``userMetadata``; its time is
the commit's own timestamp in ``_delta_log``) minus the row's commit ts (TSO physical time, when it
was produced). A row still unapplied when the follower is stopped (it fell too far behind to catch
up within the drain timeout) counts with its age at that moment, a lower bound. Reported: p50 /
p99 / max over every row; the same per third of the run and the slope of lag against time, to tell
a flat lag from a growing one (the follower falling behind). The result is also checked against the
simulator's expected tables.

The pieces are the ramp section's too (`bench.ramp`): `LiveStream` (and its `finish`, ending a
stream generated longer than it is sent), `start_following`, `feed` (a rate for a while),
`row_lags`, `lag_stats` and `step_times` (each step's time from the step log and the Delta log).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import math
import signal
import statistics
import subprocess
import sys
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bench.common import BenchConfig, log, run_args
from bench.procs import RssSampler, checkout_env, rss

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.events import Event
    from replicator.sim.expected import ExpectedState

# Growth of the p99 lag from the first to the last third of the run still called flat: the
# follower applies every 2 s (its flush interval) and a step MERGEs every table, so one step more
# or less in a third moves a percentile by about that much.
FLAT_TOLERANCE_S = 2.0
TICK_S = 0.05


class Follower(Protocol):
    """A running follower: `running()` while it has not exited; `stop()` asks it to stop (SIGTERM),
    waits for it, and returns what is known of its exit."""

    def running(self) -> bool: ...

    def stop(self) -> dict[str, Any]: ...


StartFollower = Callable[[str, str, str, Path, Path], Follower]
"""(bootstrap, topic, protocol, warehouse, workdir) -> a running follower."""


class SubprocessFollower:
    """``replicator run`` (follow mode) as a subprocess, its and its JVM's RSS sampled."""

    def __init__(self, cfg: BenchConfig, bootstrap: str, topic: str, protocol: str, warehouse: Path,
                 workdir: Path) -> None:
        cmd = [sys.executable, "-m", "replicator", "run", "--bootstrap-servers", bootstrap, "--topic", topic,
               "--protocol", protocol, "--warehouse", str(warehouse), "--json-summary",
               "--max-buffer-rows", str(cfg.max_buffer_rows), *run_args(cfg)]
        self.log = workdir / f"follower-{topic}.log"
        self._err = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err, cwd=workdir, env=checkout_env())
        self.sampler = RssSampler(self.proc.pid)
        self.sampler.start()
        self._stopped: dict[str, Any] | None = None

    def running(self) -> bool:
        return self.proc.poll() is None

    def driver_rss(self) -> int:
        """The Python driver's resident set size now (bytes)."""
        return rss(self.proc.pid)

    def stop(self) -> dict[str, Any]:
        if self._stopped is not None:
            return self._stopped
        t0 = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        stop_s = time.perf_counter() - t0
        self.sampler.stop()
        self._err.close()
        summary: dict[str, Any] | None = None
        lines = out.decode(errors="replace").strip().splitlines()
        with contextlib.suppress(ValueError, IndexError):
            summary = json.loads(lines[-1])
        self._stopped = {
            "exit_code": self.proc.returncode, "stop_s": stop_s, "summary": summary,
            "driver_peak_rss": self.sampler.driver_peak, "jvm_peak_rss": self.sampler.jvm_peak,
            "driver_cpu_s": self.sampler.driver_cpu, "jvm_cpu_s": self.sampler.jvm_cpu, "log": str(self.log),
            "log_tail": self.log.read_text(errors="replace")[-2000:] if self.proc.returncode else ""}
        return self._stopped


class LiveStream:
    """The simulator's events sent as they would arrive from a live TiCDC: commit ts = now.

    `events` row changes of the simulator over `tables` tables; `finish()` ends the stream early,
    at a point where the simulator's state is exactly what was sent (the ramp section's streams are
    generated longer than they are sent)."""

    def __init__(self, protocol: str, seed: int, bootstrap: str, topic: str, *, events: int, tables: int,
                 partitions: int) -> None:
        from kafka import KafkaProducer

        from replicator.codec import codec_for
        from replicator.sim.simulate import SimConfig, Simulation, ensure_topic

        self.sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=max(events, 1),  # type: ignore[arg-type]
                                        partitions=partitions, tables=tables, ddl="none",
                                        retry_rate=0.0, restart_rate=0.0))
        self.partitions = partitions
        self.codec = codec_for(protocol)
        self.topic = topic
        ensure_topic(bootstrap, topic, partitions)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, enable_idempotence=True,
                                      max_request_size=32 << 20, client_id="replicator-bench-follower")
        self._events = self._originals()
        self._peek: tuple[int, Event] | None = None
        self._tso = 0
        self._last_orig = -1
        self._last_new = 0
        self.exhausted = False
        self.rows_sent = 0
        self.ddl_sent = 0
        self.resolved_sent = 0
        self.replays_left_out = 0
        self.produced: dict[str, list[int]] = {}  # "schema.table" -> commit ts of each row sent

    def _originals(self) -> Iterator[tuple[int, Event]]:
        """The simulator's events without its replays (told apart by its replay counter, which it
        bumps right before yielding a replayed event); its resolved events come through (`emit`
        skips them: the bench sends its own), so that `finish` can stop right at one."""
        stats = self.sim.stats
        seen = 0
        for p, ev in self.sim.events():
            if stats.replayed_events != seen:
                seen = stats.replayed_events
                self.replays_left_out += 1
                continue
            yield p, ev

    def now_ts(self) -> int:
        """A TSO for now, strictly above every one handed out before."""
        ts = (time.time_ns() // 1_000_000) << 18
        self._tso = ts if ts > self._tso else self._tso + 1
        return self._tso

    def _next(self) -> tuple[int, Event] | None:
        if self._peek is None:
            self._peek = next(self._events, None)
            if self._peek is None:
                self.exhausted = True
        return self._peek

    def _send(self, batch: dict[int, list[Event]]) -> None:
        """Send and wait for every record's acknowledgement: a record the broker never took (its
        delivery timeout passed on a loaded machine) would leave the tables short of the state the
        bench expects, so it stops the bench rather than passing unseen."""
        failures: list[BaseException] = []
        for p, events in batch.items():
            for key, value in self.codec.encode(events):
                self.producer.send(self.topic, key=key, value=value, partition=p).add_errback(failures.append)
        self.producer.flush()
        if failures:
            raise RuntimeError(f"{len(failures)} record(s) to {self.topic} were not acknowledged by the broker: "
                               f"{failures[0]!r}")

    def emit(self, rows_target: int, *, until_first_row: bool = False) -> None:
        """Send events until `rows_target` rows have been sent in all, never splitting a
        transaction (rows sharing a commit ts); `until_first_row`: only what precedes the first row."""
        from replicator.events import DdlEvent, RowChange

        batch: dict[int, list[Event]] = {}
        while (nxt := self._next()) is not None:
            p, ev = nxt
            if not isinstance(ev, RowChange | DdlEvent):  # the simulator's resolved: the bench sends its own
                if self.rows_sent >= rows_target and not until_first_row:
                    break  # left peeked: `finish` stops right at it
                self._peek = None
                continue
            orig = ev.commit_ts
            if orig != self._last_orig:
                if until_first_row and isinstance(ev, RowChange):
                    break
                if self.rows_sent >= rows_target and not until_first_row:
                    break
                self._last_orig, self._last_new = orig, self.now_ts()
            self._peek = None
            live = dataclasses.replace(ev, commit_ts=self._last_new)
            batch.setdefault(p, []).append(live)
            if isinstance(ev, RowChange):
                self.rows_sent += 1
                self.produced.setdefault(f"{ev.schema}.{ev.table}", []).append(self._last_new)
            else:
                self.ddl_sent += 1
        self._send(batch)

    def resolve(self) -> int:
        """A resolved event with the current TSO on every partition (after every row sent so far)."""
        from replicator.events import Resolved

        ts = self.now_ts()
        self._send({p: [Resolved(ts)] for p in range(self.partitions)})
        self.resolved_sent += 1
        return ts

    def finish(self) -> ExpectedState:
        """Send on to the simulator's next resolved point (the rest of the transaction under way, and
        at most a few more) and return its state there: the tables as the rows sent make them."""
        from replicator.events import Resolved

        while (nxt := self._next()) is not None:
            if isinstance(nxt[1], Resolved):
                return self.sim.state_now()  # the generator is paused right after yielding it
            self.emit(self.rows_sent + 1)
        return self.sim.expected

    def close(self) -> None:
        self.producer.close()


def feed(stream: LiveStream, follower: Follower, rate: float, seconds: float = math.inf,
         on_second: Callable[[], None] | None = None) -> dict[str, Any]:
    """Send rows at `rate` per second for `seconds` (or until the stream runs out), a resolved event
    on every partition every second (then `on_second`); raises if the follower exits meanwhile.
    Returns the rows sent, the seconds, the achieved rate and the wall-clock span (epoch s) the rows'
    commit ts fall in."""
    start_rows = stream.rows_sent
    began, t0 = time.time(), time.monotonic()
    next_resolved = t0 + 1.0
    # Two ticks' rows at most per call (on pace a call sends less): past what the producer can send,
    # a call that caught up with the whole shortfall would take longer each time and run the
    # segment far past its seconds.
    chunk = max(2, math.ceil(2 * rate * TICK_S))
    while not stream.exhausted:
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        stream.emit(min(start_rows + int((now - t0) * rate), stream.rows_sent + chunk))
        if now >= next_resolved:
            stream.resolve()
            next_resolved += 1.0
            if on_second is not None:
                on_second()
        if not follower.running():
            raise RuntimeError(f"the follower exited during the run: {follower.stop()}")
        time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    elapsed = time.monotonic() - t0
    rows = stream.rows_sent - start_rows
    return {"rate": rate, "rows": rows, "seconds": elapsed, "achieved_rate": rows / max(elapsed, 1e-9),
            "started_at": began, "ended_at": time.time()}


def start_following(stream: LiveStream, start: StartFollower, bootstrap: str, protocol: str, warehouse: Path,
                    workdir: Path, timeout_s: float = 300.0) -> tuple[Follower, float]:
    """The tables' CREATE TABLE steps into the topic, then the follower started and waited for until it
    has applied them (so JVM start-up is not lag): (the follower, its start-up seconds)."""
    stream.emit(0, until_first_row=True)
    ready_ts = stream.resolve()
    t_start = time.perf_counter()
    follower = start(bootstrap, stream.topic, protocol, warehouse, workdir)
    if not wait_applied(warehouse, ready_ts, follower, timeout_s=timeout_s):
        raise RuntimeError(f"the follower did not apply the CREATE TABLE steps: {follower.stop()}")
    return follower, time.perf_counter() - t_start


def _applied_ts(warehouse: Path) -> int:
    from replicator.warehouse import Warehouse

    with contextlib.suppress(Exception):  # the follower may be replacing the file right now
        return Warehouse(str(warehouse)).load_state().applied_ts
    return 0


def wait_applied(warehouse: Path, ts: int, follower: Follower, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _applied_ts(warehouse) >= ts:
            return True
        if not follower.running():
            return False
        time.sleep(0.25)
    return False


def table_commits(table_path: str | Path) -> list[tuple[int, int, float]]:
    """(step, the step's upper commit ts, commit time in s) of each data commit of a replicator
    table (MERGE, or WRITE: a window into an empty table commits as the applier's insert), in commit
    order, from the table's ``_delta_log`` (the commit's userMetadata and timestamp)."""
    out: list[tuple[int, int, float]] = []
    for f in sorted((Path(table_path) / "_delta_log").glob("*.json")):
        for line in f.read_text().split("\n"):  # Delta leaves U+2028 raw inside strings
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if not info or info.get("operation") not in ("MERGE", "WRITE") or not info.get("userMetadata"):
                continue
            with contextlib.suppress(ValueError, KeyError, TypeError):
                meta = json.loads(info["userMetadata"])["replicator"]
                out.append((int(meta.get("step", 0)), int(meta["applied_ts"]), int(info["timestamp"]) / 1000))
    return out


def merge_commits(table_path: str | Path) -> list[tuple[int, float]]:
    """(step's upper commit ts, commit time in s) of each MERGE commit of a replicator table, in
    commit order (`table_commits`)."""
    return [(ts, at) for _, ts, at in table_commits(table_path)]


def step_times(warehouse: Path) -> list[tuple[float, float]]:
    """(start, seconds) of every step that wrote rows, start in epoch s: from the step's
    ``recorded_at`` in the step log (taken as it starts) to the last Delta commit carrying its step
    number (the state is saved right after)."""
    from replicator.warehouse import Warehouse

    wh = Warehouse(str(warehouse))
    ends: dict[int, float] = {}
    for entry in wh.load_state().live_tables():
        for step, _, at in table_commits(entry.path):
            ends[step] = max(ends.get(step, 0.0), at)
    out: list[tuple[float, float]] = []
    for record in wh.windows():
        end = ends.get(int(record["step"]))
        if end is not None:
            start = dt.datetime.fromisoformat(record["recorded_at"]).timestamp()
            out.append((start, max(end - start, 0.0)))
    return out


def row_lags(warehouse: Path, produced: dict[str, list[int]],
             stopped_at: float) -> tuple[list[tuple[float, float]], int]:
    """(row's commit time in s, lag in s) of every produced row, and how many rows no MERGE
    applied before the follower was stopped: those count with their age at `stopped_at` (epoch s),
    a lower bound of their lag, so a follower that fell behind is not flattered by leaving them out."""
    from replicator.events import tso_physical_ms
    from replicator.warehouse import Warehouse

    state = Warehouse(str(warehouse)).load_state()
    lags: list[tuple[float, float]] = []
    missing = 0
    for name, stamps in produced.items():
        schema, table = name.split(".", 1)
        entry = state.live_table(schema, table)
        commits = sorted(merge_commits(entry.path)) if entry is not None else []
        # A row is applied by the first MERGE whose step reached its commit ts (steps move forward,
        # so the commits' upper ts and times rise together).
        reached = [ts for ts, _ in commits]
        for ts in stamps:
            i = bisect_left(reached, ts)
            made = tso_physical_ms(ts) / 1000
            if i == len(reached):
                missing += 1
                lags.append((made, stopped_at - made))
                continue
            lags.append((made, commits[i][1] - made))
    lags.sort()
    return lags, missing


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def lag_stats(lags: list[tuple[float, float]], tolerance_s: float = FLAT_TOLERANCE_S) -> dict[str, Any]:
    """p50 / p99 / max over all rows; per third of the run; slope (s of lag per minute); flat when the
    last third's p99 is at most `tolerance_s` above the first's."""
    if not lags:
        return {"rows": 0}
    values = [lag for _, lag in lags]
    t0, t1 = lags[0][0], lags[-1][0]
    span = max(t1 - t0, 1e-9)
    thirds: list[dict[str, float]] = []
    for k in range(3):
        lo, hi = t0 + span * k / 3, t0 + span * (k + 1) / 3
        part = [lag for t, lag in lags if lo <= t < hi or (k == 2 and t == t1)]
        thirds.append({"rows": len(part), "p50_s": pct(part, 0.5), "p99_s": pct(part, 0.99),
                       "max_s": max(part, default=0.0)})
    xs = [t - t0 for t, _ in lags]
    slope = 0.0
    if len(lags) > 1 and span > 0:
        mx, my = statistics.fmean(xs), statistics.fmean(values)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / var * 60 if var else 0.0
    growth = thirds[2]["p99_s"] - thirds[0]["p99_s"]
    return {"rows": len(values), "p50_s": pct(values, 0.5), "p99_s": pct(values, 0.99), "max_s": max(values),
            "mean_s": statistics.fmean(values), "thirds": thirds, "slope_s_per_min": slope,
            "p99_growth_s": growth, "flat": growth <= tolerance_s, "span_s": span}


def bench_follower(cfg: BenchConfig, bootstrap: str, scratch: Path,
                   start: StartFollower | None = None) -> dict[str, Any]:
    """Section "follower" (Spark-free part): the live stream, the follower, the lag per row."""

    def subprocess_follower(b: str, t: str, p: str, w: Path, d: Path) -> Follower:
        return SubprocessFollower(cfg, b, t, p, w, d)

    start = start or subprocess_follower
    protocol = cfg.protocols[0]
    topic = f"bench-follow-{protocol}-{uuid.uuid4().hex[:8]}"
    warehouse = scratch / f"wh-follow-{protocol}"
    stream = LiveStream(protocol, cfg.seed + 200, bootstrap, topic,
                        events=int(cfg.follower_rate * cfg.follower_seconds), tables=cfg.follower_tables,
                        partitions=cfg.partitions)
    out: dict[str, Any] = {"protocol": protocol, "rate": cfg.follower_rate, "tables": cfg.follower_tables,
                           "partitions": cfg.partitions, "seconds": cfg.follower_seconds, "topic": topic,
                           "warehouse": str(warehouse)}
    follower: Follower | None = None
    try:
        # The tables' CREATE TABLE steps first, applied before the clock starts.
        follower, out["startup_s"] = start_following(stream, start, bootstrap, protocol, warehouse, scratch)
        log.info("follower: up after %.1f s; %d row changes/s over %d tables for %.0f s", out["startup_s"],
                 cfg.follower_rate, cfg.follower_tables, cfg.follower_seconds)
        fed = feed(stream, follower, cfg.follower_rate)  # until the simulated stream runs out
        final_ts = stream.resolve()
        out["produce_s"] = fed["seconds"]
        out["rows_sent"] = stream.rows_sent
        out["achieved_rate"] = fed["achieved_rate"]
        out["resolved_sent"] = stream.resolved_sent
        out["replays_left_out"] = stream.replays_left_out
        t_drain = time.monotonic()
        # A follower that keeps up applies the last rows within seconds; one that fell behind is not
        # waited for longer than the input lasted (at least a minute): its unapplied rows are the finding.
        out["caught_up"] = wait_applied(warehouse, final_ts, follower, timeout_s=max(60.0, cfg.follower_seconds))
        out["drain_s"] = time.monotonic() - t_drain
        log.info("follower: %d rows in %.0f s (%.0f/s); caught up %.1f s after the last one: %s", stream.rows_sent,
                 out["produce_s"], out["achieved_rate"], out["drain_s"], out["caught_up"])
    finally:
        out["stopped_at"] = time.time()
        if follower is not None:
            out["exit"] = follower.stop()
        stream.close()
    out["stream"] = {"expected": stream.sim.expected, "stats": stream.sim.stats.to_json()}
    lags, missing = row_lags(warehouse, stream.produced, out["stopped_at"])
    out["unapplied_rows"] = missing
    out["lag"] = lag_stats(lags)
    lag = out["lag"]
    if lag["rows"]:
        log.info("follower: lag p50 %.1f s, p99 %.1f s, max %.1f s; p99 first / last third %.1f / %.1f s",
                 lag["p50_s"], lag["p99_s"], lag["max_s"], lag["thirds"][0]["p99_s"], lag["thirds"][2]["p99_s"])
    return out


def finish_follower(spark: SparkSession, follower: dict[str, Any]) -> None:
    """Section "follower" (Spark part): the follower's tables against the simulator's expected ones."""
    from replicator.sim.simcheck import compare_tables, read_warehouse

    diffs = compare_tables(follower["stream"].pop("expected"), read_warehouse(spark, follower["warehouse"]))
    follower["verified"] = not diffs
    follower["diffs"] = diffs[:5]
    log.info("follower: verified=%s", follower["verified"])
