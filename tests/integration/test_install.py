"""Installed and deployed as a user does it, outside the repository:

* the built wheel in a fresh virtualenv (nothing from the checkout on the path) replicates a topic
  with `--reader driver`, its jars from a directory as a user behind a proxy passes them
  (REPLICATOR_SPARK_JARS); stdout is the `--json-summary` document and nothing else, the working
  directory stays empty, and the installed `replicator check` proves the tables;
* `replicator jars` of that installation fetches the Delta jars from Maven Central itself;
* (`make soak`) the spark-submit recipe of docs/running-on-spark.md against `make cluster-up`'s standalone
  cluster: client mode, the packed environment without pyspark (the cluster provides it) for the
  executors, the driver's own Python, loopback addresses kept, `--reader spark`, exact tables;
  `cluster-down` removes the workers' scratch space (the unpacked environments);
* (`make soak`) the README's two shards as two spark-submit applications on that cluster, at once
  (`spark.cores.max=1` each, the driver reader, Delta jars only): each holds a core at the same
  moment, and the shards' tables are disjoint and together the simulator's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.explore import open_warehouse
from replicator.runtime import jars
from replicator.shards import ShardSpec
from replicator.sim.localkafka.process import free_ports, pid_alive
from replicator.sim.localspark import ClusterHandle, master_state, start, stop
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.support.cli import kill_group, tail
from tests.support.env import clean_env

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CACHED_JARS = REPO / ".cache" / "spark-jars"


@dataclass(frozen=True)
class Installed:
    env: Path  # the virtualenv the wheel went into
    home: Path  # an empty home directory (no ~/.m2, no caches of the checkout's)

    @property
    def bin(self) -> Path:
        return self.env / "bin"

    def environ(self, **extra: str) -> dict[str, str]:
        """A user's shell with the virtualenv active: nothing of the checkout or the test run."""
        env = clean_env("REPLICATOR_*", "PYTHON*", "PYSPARK_*", "SPARK_*", "VIRTUAL_ENV*", "PYTEST*")
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(self.env),
                   HOME=str(self.home), REPLICATOR_DRIVER_MEMORY="1g")
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    dist, env, home = root / "dist", root / "env", root / "home"
    home.mkdir()
    # Without the test run's PYTHONPATH: with the checkout on it, pip takes the checkout's egg-info
    # for an installed replicator and leaves the wheel out of the virtualenv.
    clean = clean_env("PYTHONPATH")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=600, env=clean)
    wheel = next(dist.glob("replicator-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300, env=clean)
    done = subprocess.run([str(env / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel), "venv-pack==0.2.0"],
                          capture_output=True, text=True, timeout=1200, env=clean)
    assert done.returncode == 0, done.stderr[-3000:]
    return Installed(env, home)


def _stream(kafka_bootstrap: str, tmp: Path, seed: int, protocol: str) -> tuple[Simulation, str, Path, int]:
    sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=300, partitions=2, tables=3,  # type: ignore[arg-type]
                               ddl="auto"))
    topic = new_topic(kafka_bootstrap, 2, prefix="install")
    messages = list(sim.messages())
    produce(kafka_bootstrap, topic, messages)
    expected = tmp / "expected.json"
    sim.expected.write(expected)
    return sim, topic, expected, len(messages)


def _jar_dir(tmp: Path, *groups: str) -> Path:
    """What a user behind a proxy hands over: a directory of the declared jars (here from the
    checkout's cache, as `replicator jars --into DIR` fills one elsewhere)."""
    into = tmp / "jars"
    into.mkdir()
    for art in jars.artifacts(groups):
        shutil.copy2(CACHED_JARS / art.file_name, into / art.file_name)
    return into


def test_the_wheel_outside_the_repository(installed: Installed, kafka_bootstrap: str, tmp_path: Path) -> None:
    sim, topic, expected, messages = _stream(kafka_bootstrap, tmp_path, seed=291, protocol="craft")
    work = tmp_path / "work"
    work.mkdir()
    wh = tmp_path / "wh"
    env = installed.environ(REPLICATOR_SPARK_JARS=str(_jar_dir(tmp_path, "delta")))
    run = subprocess.run(
        ["replicator", "run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "craft",
         "--warehouse", str(wh), "--until-caught-up", "--json-summary"],
        cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads(run.stdout)  # stdout as-is: the summary and nothing else
    assert summary["records"] == messages and summary["dead_letters"] == 0, summary
    check = subprocess.run(["replicator", "check", "--warehouse", str(wh), "--expected", str(expected), "--json"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, (check.stdout[-3000:], check.stderr[-3000:])
    result = json.loads(check.stdout)
    assert result["ok"] and result["tables"] == len(sim.expected.tables)
    assert sorted(p.name for p in work.iterdir()) == []  # no spark-warehouse/, metastore_db/, derby.log
    # Where the package runs from: the virtualenv, not the checkout.
    where = subprocess.run(["python", "-c", "import replicator; print(replicator.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(installed.env))


def test_the_installed_replicator_fetches_its_jars_from_maven_central(installed: Installed, tmp_path: Path) -> None:
    done = subprocess.run(["replicator", "jars", "--into", str(tmp_path / "fetched")], cwd=tmp_path,
                          env=installed.environ(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    paths = [Path(p) for p in done.stdout.strip().split(",")]
    assert [p.name for p in paths] == [a.file_name for a in jars.artifacts(["delta"])]
    assert all(p.read_bytes() == (CACHED_JARS / p.name).read_bytes() for p in paths)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    state = tmp_path_factory.mktemp("submit-cluster")
    handle = start(state, free_ports(1)[0])
    try:
        yield handle
    finally:
        assert stop(state)
        assert not [p for p in (handle.master_pid, *handle.worker_pids) if pid_alive(p)]
        assert not list(state.glob("work-*")), "cluster-down leaves the workers' scratch space"


def _site(installed: Installed) -> Path:
    return next((installed.env / "lib").glob("python3.*")) / "site-packages"


def _pack(installed: Installed, work: Path) -> Path:
    """The executors' environment: the virtualenv without pyspark and py4j (the cluster has them)."""
    site = _site(installed).relative_to(installed.env)
    packed = work / "replicator-env.tar.gz"
    pack = subprocess.run(
        ["venv-pack", "-q", "-p", str(installed.env), "-o", str(packed),
         "--exclude", f"{site}/pyspark/*", "--exclude", f"{site}/py4j/*"],
        cwd=work, env=installed.environ(), capture_output=True, text=True, timeout=900)
    assert pack.returncode == 0, pack.stderr
    assert packed.stat().st_size < 250 * 2**20, packed.stat().st_size  # pyspark alone is ~470 MB unpacked
    return packed


@pytest.mark.soak  # packs ~140 MB and runs a cluster application (5-10 min here): `make soak`
def test_spark_submit_as_the_readme_writes_it(installed: Installed, cluster: ClusterHandle, kafka_bootstrap: str,
                                              spark: Any, tmp_path: Path) -> None:
    sim, topic, _, _ = _stream(kafka_bootstrap, tmp_path, seed=293, protocol="open")
    work = tmp_path / "work"
    work.mkdir()
    wh = tmp_path / "wh"
    env = installed.environ()
    packed = _pack(installed, work)
    jar_list = subprocess.run(["replicator", "jars", "--kafka"], cwd=work, capture_output=True, text=True,
                              env=installed.environ(REPLICATOR_SPARK_JARS="", REPLICATOR_JARS_CACHE=str(
                                  _jar_dir(tmp_path, "delta", "kafka"))), check=True).stdout.strip()
    main = _site(installed) / "replicator" / "__main__.py"
    cmd = ["spark-submit", "--master", cluster.master_url, "--deploy-mode", "client",
           "--jars", jar_list,
           "--archives", f"{packed}#env",
           "--conf", "spark.pyspark.python=./env/bin/python",
           "--conf", f"spark.pyspark.driver.python={installed.bin / 'python'}",
           "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.executor.memory=1g",
           "--driver-java-options", "-Xlog:disable -Xlog:all=warning:stderr",
           str(main), "run", "--reader", "spark", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
           "--protocol", "open", "--warehouse", str(wh), "--until-caught-up", "--json-summary"]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-5000:]
    json.loads(done.stdout)  # the summary is all of stdout, under spark-submit too
    assert check_warehouse(spark, wh, sim.expected) == []
    apps = master_state(cluster.webui_port)["completedapps"]
    assert any(a["name"] == "replicator" for a in apps), apps  # the work ran on the cluster's executors
    assert sorted(p.name for p in work.iterdir()) == ["replicator-env.tar.gz"]
    # Loopback kept: the driver advertised 127.0.0.1 to the executors.
    stderrs = [p.read_text(errors="replace")
               for i in range(2) for p in (cluster.state_dir / f"work-{i}").glob("app-*/*/stderr")]
    assert stderrs and any("127.0.0.1" in s for s in stderrs)


@pytest.mark.soak  # packs ~140 MB and runs two cluster applications side by side (5-10 min here): `make soak`
def test_two_shards_as_two_spark_submit_applications(installed: Installed, cluster: ClusterHandle,
                                                     kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    """README "As N applications on one Spark cluster", as written: `--shard 0/2` and `--shard 1/2`
    submitted at once (driver reader, Delta jars only, one core each) to `make cluster-up`'s two
    1-core workers, into one warehouse. Both run at the same time, each with its own executor,
    and the shards' tables are disjoint and together the simulator's (a table renamed across
    shards: shop.orders hashes to shard 0, shop.orders_v2 to shard 1)."""
    sim = Simulation(SimConfig(protocol="open", seed=41, events=200, partitions=2, tables=3, ddl="rename_table"))
    topic = new_topic(kafka_bootstrap, 2, prefix="install-shards")
    produce(kafka_bootstrap, topic, sim.messages())
    expected = sim.expected
    assert set(expected.tables) == {"shop.customers", "shop.orders_v2", "shop.attachments"}
    work = tmp_path / "work"
    work.mkdir()
    wh = tmp_path / "wh"
    env = installed.environ()
    packed = _pack(installed, work)
    jar_list = subprocess.run(["replicator", "jars"], cwd=work, capture_output=True, text=True, check=True,
                              env=installed.environ(REPLICATOR_SPARK_JARS="", REPLICATOR_JARS_CACHE=str(
                                  _jar_dir(tmp_path, "delta")))).stdout.strip()
    main = subprocess.run(["python", "-c", "import replicator, os; print(os.path.dirname(replicator.__file__))"],
                          cwd=work, env=env, capture_output=True, text=True, check=True).stdout.strip()
    before = {a["id"] for a in master_state(cluster.webui_port)["completedapps"]}

    def submit(i: int) -> subprocess.Popen[bytes]:
        cmd = ["spark-submit", "--master", cluster.master_url, "--deploy-mode", "client",
               "--conf", "spark.cores.max=1",
               "--jars", jar_list, "--archives", f"{packed}#env",
               "--conf", "spark.pyspark.python=./env/bin/python",
               "--conf", f"spark.pyspark.driver.python={installed.bin / 'python'}",
               f"{main}/__main__.py",
               "run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
               "--warehouse", str(wh), "--shard", f"{i}/2", "--until-caught-up"]
        with open(tmp_path / f"shard-{i}.log", "wb") as log:
            return subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    procs = [submit(0), submit(1)]
    running: dict[str, int] = {}  # application id -> the cores it held while RUNNING
    together = False  # both applications RUNNING with a core each at one moment
    deadline = time.monotonic() + 1500
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                now = [a for a in master_state(cluster.webui_port)["activeapps"]
                       if a["state"] == "RUNNING" and a["cores"] >= 1]
            except OSError:  # a master slow to answer on a loaded machine: ask again
                continue
            running.update({a["id"]: max(running.get(a["id"], 0), a["cores"]) for a in now})
            together = together or len(now) >= 2
    finally:
        for p in procs:
            if p.poll() is None:
                kill_group(p)
    logs = [tail(tmp_path / f"shard-{i}.log", 60) for i in range(2)]
    assert [p.returncode for p in procs] == [0, 0], logs
    assert together and len(running) == 2 and set(running.values()) == {1}, running
    done = {a["id"]: a for a in master_state(cluster.webui_port)["completedapps"] if a["id"] not in before}
    assert set(done) == set(running) and {a["name"] for a in done.values()} == {"replicator"}, done
    first, second = sorted(done.values(), key=lambda a: a["starttime"])
    assert second["starttime"] < first["starttime"] + first["duration"], done  # side by side, not queued

    owned: dict[str, int] = {}
    for i in range(2):
        state = Warehouse(wh, shard=ShardSpec(i, 2)).load_state()
        assert state.applied_ts >= expected.watermark
        names = {f"{e.schema_name}.{e.table}" for e in state.live_tables()}
        assert names and not names & set(owned), (i, names, owned)
        owned.update(dict.fromkeys(names, i))
    assert set(owned) == set(expected.tables) and owned["shop.orders_v2"] == 0, owned  # renamed by its owner
    assert check_warehouse(spark, wh, expected) == []  # every shard's tables, the slowest shard's watermark
    ex = open_warehouse(wh, spark=spark)  # one warehouse to a reader: a snapshot across both shards
    assert ex.sharded and ex.watermarks()[-1] >= expected.watermark
    assert {name: df.count() for name, df in ex.snapshot(ex.watermarks()[-1]).items()} == {
        name: len(rows) for name, rows in expected.tables.items()}
    assert sorted(p.name for p in work.iterdir()) == ["replicator-env.tar.gz"]
