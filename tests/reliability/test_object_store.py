"""An `s3a://` warehouse on a real S3-compatible server under faults, with the replicator as a process
(its environment as a user's: AWS_* credentials, REPLICATOR_S3_ENDPOINT):

* kill -9 at random instants, then a rerun: exact;
* one writer at a time: two runs started together (one runs, one refuses naming the holder); a holder
  killed with kill -9 (on this machine: taken over at once; a holder elsewhere: once its lease
  expires); a holder paused past its lease (SIGSTOP) commits nothing more and exits non-zero;
* the server stopped mid-run: a clear error within the storage retry budget, nothing lost, an exact
  resume once it is back;
* wrong credentials, a missing bucket, an unreachable endpoint: one clear line each, no secret.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.storage import fileio_for
from replicator.storage.lease import Holder
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.reliability.common import size
from tests.s3_fixtures import S3Server
from tests.support.cli import kill_group, replicator_argv, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import steps_done

pytestmark = pytest.mark.reliability


@pytest.fixture()
def s3(s3_store: S3Server) -> S3Server:
    return s3_store


def _stream(kafka_bootstrap: str, seed: int, events: int, protocol: str = "craft") -> tuple[Simulation, str]:
    sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=events, partitions=3, tables=4,  # type: ignore[arg-type]
                               ddl="auto"))
    topic = new_topic(kafka_bootstrap, 3, prefix="s3-rel")
    produce(kafka_bootstrap, topic, list(sim.messages()))
    return sim, topic


def _run(s3: S3Server, bootstrap: str, topic: str, url: str, *args: str, log: Path,
         env: dict[str, str] | None = None, follow: bool = False) -> subprocess.Popen[bytes]:
    return start_replicator("run", "--bootstrap-servers", bootstrap, "--topic", topic, "--protocol", "craft",
                            "--warehouse", url, *([] if follow else ["--until-caught-up"]), *args,
                            env=cli_env(**s3.env(), **(env or {})), log=log)


@pytest.mark.soak  # a JVM start per kill on the store: `make soak` (local kills run in CI)
def test_sigkill_at_random_instants_on_s3(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    kills = size(2, 24)
    sim, topic = _stream(kafka_bootstrap, seed=81, events=size(300, 9000))
    url, log = s3.warehouse_url("kills"), tmp_path / "runs.log"
    rnd = random.Random(81)
    landed = 0
    for _ in range(kills):
        before = steps_done(url)  # type: ignore[arg-type]
        proc = _run(s3, kafka_bootstrap, topic, url, "--max-buffer-rows", "40", log=log)
        wait_for("a step of this run", lambda: proc.poll() is not None or steps_done(url) > before,  # type: ignore[arg-type]  # noqa: B023
                 timeout=600)
        time.sleep(rnd.uniform(0.0, 2.5))  # mid-MERGE, mid-commit, between data and progress, mid-read
        if proc.poll() is not None:
            assert proc.returncode == 0, tail(log)
            break
        kill_group(proc)
        landed += 1
    # A killed holder on this machine holds nothing: the rerun takes over at once (no --wait).
    final = _run(s3, kafka_bootstrap, topic, url, "--max-buffer-rows", "40", log=log)
    assert final.wait(timeout=900) == 0, tail(log)
    assert landed >= min(2, kills), f"only {landed} of {kills} kills landed"
    assert check_warehouse(spark, url, sim.expected) == []
    assert "took over" in log.read_text(errors="replace")


def test_crash_after_an_append_and_before_progress_on_s3(s3: S3Server, kafka_bootstrap: str, spark: Any,
                                                         tmp_path: Path) -> None:
    """The named instants around an append of fresh inserts, on the store: its commit landed and the
    step's progress did not; the rerun reads the table's applied ts back from the store and appends
    nothing twice."""
    sim, topic = _stream(kafka_bootstrap, seed=85, events=160)
    url, log = s3.warehouse_url("append-faults"), tmp_path / "runs.log"
    args = ("--max-buffer-rows", "40", "--apply-parallelism", "2")
    for fault in ("after_append:2", "before_progress:2"):
        proc = _run(s3, kafka_bootstrap, topic, url, *args, log=log, env={"REPLICATOR_FAULT": fault})
        assert proc.wait(timeout=900) in (-9, 137), f"{fault}: not crashed there:\n{tail(log)}"
        assert f"injected fault {fault.split(':')[0]}" in tail(log, 5), tail(log)
    final = _run(s3, kafka_bootstrap, topic, url, *args, log=log)
    assert final.wait(timeout=900) == 0, tail(log)
    assert check_warehouse(spark, url, sim.expected) == []
    steps = Warehouse(url).windows()
    assert sum(r.get("appended", 0) for r in steps) > 0, "the stream's fresh inserts were appended"


def test_one_writer_at_a_time(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    sim, topic = _stream(kafka_bootstrap, seed=83, events=120)
    url, log_a, log_b = s3.warehouse_url("lease"), tmp_path / "a.log", tmp_path / "b.log"
    a = _run(s3, kafka_bootstrap, topic, url, log=log_a)
    b = _run(s3, kafka_bootstrap, topic, url, log=log_b)
    codes = sorted((a.wait(timeout=600), b.wait(timeout=600)))
    assert codes == [0, 1], (codes, tail(log_a), tail(log_b))
    refused = tail(log_a) if a.returncode else tail(log_b)
    assert f"warehouse {url} is in use by another replicator run (host {socket.gethostname()}, pid " in refused
    assert "since" in refused and "--wait" in refused
    assert check_warehouse(spark, url, sim.expected) == []

    # A holder on another machine that stopped renewing: refused until its lease expires, then taken over.
    io = fileio_for(url)
    now = time.time()
    ghost = Holder(holder="ghost", host="elsewhere.example", pid=4242, boot="", since=now - 30, expires_at=now + 6)
    versioned = io.read_versioned(f"{url}/_replicator/lease.json")
    assert versioned is not None and io.replace(f"{url}/_replicator/lease.json", ghost.to_json(), versioned.etag)
    refused_run = _run(s3, kafka_bootstrap, topic, url, log=log_b)
    assert refused_run.wait(timeout=300) == 1
    assert "host elsewhere.example, pid 4242" in tail(log_b)
    waited = _run(s3, kafka_bootstrap, topic, url, "--wait", log=log_b)
    assert waited.wait(timeout=300) == 0, tail(log_b)
    assert time.time() >= ghost.expires_at
    assert "took over" in tail(log_b, 80)


@pytest.mark.soak  # minutes of waiting on leases / retry budgets: `make soak`
def test_a_holder_paused_past_its_lease_commits_nothing_more(s3: S3Server, kafka_bootstrap: str, spark: Any,
                                                             tmp_path: Path) -> None:
    sim, topic = _stream(kafka_bootstrap, seed=85, events=150)
    url, log_a, log_b = s3.warehouse_url("paused"), tmp_path / "a.log", tmp_path / "b.log"
    follower = _run(s3, kafka_bootstrap, topic, url, "--lease-seconds", "6", "--max-buffer-rows", "40",
                    log=log_a, follow=True)
    try:
        wait_for("the follower's first step", lambda: steps_done(url) > 0, timeout=600)  # type: ignore[arg-type]
        os.kill(follower.pid, signal.SIGSTOP)  # the Python process: its lease renewals stop with it
        time.sleep(8)
        taker = _run(s3, kafka_bootstrap, topic, url, "--lease-seconds", "6", log=log_b)
        assert taker.wait(timeout=600) == 0, tail(log_b)
        wh = Warehouse(url)
        state_after_taker = wh.io.read(wh.state_path.path)
        versions = _table_versions(spark, url)
        os.kill(follower.pid, signal.SIGCONT)
        code = follower.wait(timeout=120)
        assert code == 3, (code, tail(log_a))
        assert "no longer holds" in tail(log_a) and "without committing" in tail(log_a)
        assert wh.io.read(wh.state_path.path) == state_after_taker, "the paused holder wrote state after losing"
        assert _table_versions(spark, url) == versions, "the paused holder committed to a table after losing"
    finally:
        if follower.poll() is None:
            os.kill(follower.pid, signal.SIGCONT)
            kill_group(follower)
    assert check_warehouse(spark, url, sim.expected) == []


def _table_versions(spark: Any, url: str) -> dict[str, int]:
    from replicator.delta.writer import TableWriter

    delta = TableWriter(spark)
    return {e.uid: delta.table_version(e.path) for e in Warehouse(url).load_state().tables.values()}


@pytest.mark.soak  # minutes of waiting on leases / retry budgets: `make soak`
def test_the_server_stopped_mid_run(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    sim, topic = _stream(kafka_bootstrap, seed=87, events=size(300, 3000))
    url, log = s3.warehouse_url("outage"), tmp_path / "run.log"
    proc = _run(s3, kafka_bootstrap, topic, url, "--max-buffer-rows", "30", "--storage-retry-budget", "10", log=log)
    try:
        wait_for("a step", lambda: proc.poll() is not None or steps_done(url) > 1, timeout=600)  # type: ignore[arg-type]
        assert proc.poll() is None, "the stream was applied before the outage: make it larger"
        started = time.monotonic()
        with s3.stopped():
            code = proc.wait(timeout=600)
            waited = time.monotonic() - started
        # The store's own error (1), or the lease's term ran out first while the store was away (3).
        assert code in (1, 3), (code, tail(log))
    finally:
        if proc.poll() is None:
            kill_group(proc)
    last = tail(log, 3)
    assert "nothing" in last and ("reachable" in last or "cut off from the store" in last), last
    assert "Traceback" not in log.read_text(errors="replace")
    print(f"\nthe run stopped {waited:.0f}s into the outage")
    rerun = _run(s3, kafka_bootstrap, topic, url, log=log)
    assert rerun.wait(timeout=600) == 0, tail(log)
    assert check_warehouse(spark, url, sim.expected) == []


@pytest.mark.parametrize("case", ["wrong secret", "missing bucket", "unreachable endpoint"])
def test_bad_store_settings_give_one_clear_line(s3: S3Server, kafka_bootstrap: str, tmp_path: Path, case: str) -> None:
    topic = new_topic(kafka_bootstrap, 1, prefix="s3-bad")
    url = s3.warehouse_url("bad")
    env: dict[str, str] = {}
    if case == "wrong secret":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-42"
    elif case == "missing bucket":
        url = "s3a://no-such-bucket-here/wh"
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env["REPLICATOR_S3_ENDPOINT"] = f"http://127.0.0.1:{port}"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                          "--warehouse", url, "--until-caught-up", "--storage-retry-budget", "3")
    done = subprocess.run(cmd, capture_output=True, timeout=300, env=cli_env(**{**s3.env(), **env}))
    err = done.stderr.decode(errors="replace").strip()
    assert done.returncode == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip() and " WARNING " not in ln]
    assert len(lines) == 1 and lines[0].startswith("replicator run: error: "), err
    assert url in lines[0]
    assert s3.secret_key not in err and "not-the-secret-42" not in err
    expected = {"wrong secret": "refused the credentials", "missing bucket": "does not exist",
                "unreachable endpoint": "unreachable"}[case]
    assert expected in lines[0], lines[0]
    assert json.dumps(err)  # printable


_USER_JOB = '''
"""A user's own Spark job beside the replicator: its session built from `replicator spark-conf`'s
Python form, OPTIMIZE and VACUUM of every replicated table in a loop until told to stop."""
import json, sys, time
from pathlib import Path

from replicator.warehouse import Warehouse

ns = {}
exec(Path(sys.argv[1]).read_text(), ns)  # noqa: S102 (the snippet `replicator spark-conf` printed)
spark, url, stop = ns["spark"], sys.argv[2], Path(sys.argv[3])
spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "true")  # a VACUUM commits START and END
print("ready", flush=True)
done = {"optimize": 0, "vacuum": 0, "conflict": 0}
while not stop.exists():
    wh = Warehouse(url)
    for entry in (wh.load_state().live_tables() if wh.io.exists(wh.state_path.path) else []):
        try:
            key = ", ".join(f"`{k}`" for k in entry.table_spec.key[:1])  # clustered by the key: rewrites
            spark.sql(f"OPTIMIZE delta.`{entry.path}`" + (f" ZORDER BY ({key})" if key else "")).collect()
            done["optimize"] += 1
            spark.sql(f"VACUUM delta.`{entry.path}` RETAIN 168 HOURS").collect()
            done["vacuum"] += 1
        except Exception as exc:  # Delta's conflicts: the replicator's commit won that version
            if "Concurrent" not in type(exc).__name__ + str(exc)[:300]:
                raise
            done["conflict"] += 1
    time.sleep(0.2)
print(json.dumps(done))
'''


@pytest.mark.soak  # two driver JVMs and a run of small steps on the store: `make soak`
@pytest.mark.parametrize("seed", range(89, 89 + size(1, 3)))
def test_a_users_maintenance_configured_by_spark_conf_during_a_run(s3: S3Server, kafka_bootstrap: str, spark: Any,
                                                                   tmp_path: Path, seed: int) -> None:
    """A user's Spark job, configured as `replicator spark-conf` says, OPTIMIZEs and VACUUMs the
    tables of an `s3a://` warehouse while a run writes them in small steps: their commits race for the same
    versions through the same conditional commit store, and whichever loses goes again (the
    replicator re-plans on the version it lost to). Every table equals the stream, the step log
    reaches the watermark `state.json` holds, and the user's commits are in the tables' history."""
    sim, topic = _stream(kafka_bootstrap, seed=seed, events=size(400, 3000))
    url, log, stop = s3.warehouse_url("user-optimize"), tmp_path / "run.log", tmp_path / "stop"
    env = cli_env(**s3.env())
    conf = subprocess.run(replicator_argv("spark-conf", "--warehouse", url, "--form", "python"), env=env,
                          capture_output=True, text=True, timeout=300)
    assert conf.returncode == 0, conf.stderr
    (tmp_path / "conf.py").write_text(conf.stdout)
    (tmp_path / "user_job.py").write_text(_USER_JOB)
    with (tmp_path / "user.log").open("ab") as user_log:
        user = subprocess.Popen([sys.executable, str(tmp_path / "user_job.py"), str(tmp_path / "conf.py"), url,
                                 str(stop)], env=env, stdout=subprocess.PIPE, stderr=user_log)
    assert user.stdout is not None and user.stdout.readline().strip() == b"ready", tail(tmp_path / "user.log")
    run = _run(s3, kafka_bootstrap, topic, url, "--max-buffer-rows", "20", log=log)
    try:
        assert run.wait(timeout=900) == 0, tail(log)
    finally:
        stop.touch()
        out, _ = user.communicate(timeout=300)
    assert user.returncode == 0, tail(tmp_path / "user.log")
    done = json.loads(out.decode().strip().splitlines()[-1])
    assert check_warehouse(spark, url, sim.expected) == []
    wh = Warehouse(url)
    state = wh.load_state()
    assert max(r["hi"] for r in wh.windows()) == state.applied_ts == sim.expected.watermark
    users = [h["operation"] for e in state.live_tables()
             for h in spark.sql(f"DESCRIBE HISTORY delta.`{e.path}`").collect()
             if h["operation"] in ("OPTIMIZE", "VACUUM START", "VACUUM END")]
    assert done["optimize"] > 0 and users, (done, users)
    print(f"\nuser job {done}; its commits in the live tables: "
          f"{ {op: users.count(op) for op in sorted(set(users))} }")
