"""`make cluster-up`'s Spark standalone cluster (a master and two workers from the pyspark
installation) and a replicator run whose Spark work executes on it
(`REPLICATOR_SPARK_MASTER=spark://...`): the tables come out as the model says, and the work ran in
the workers' executors, not in the driver."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.localkafka.process import free_ports, pid_alive
from replicator.sim.localspark import ClusterHandle, master_state, start, status, stop
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.reliability.common import assert_model_state, stream_records
from tests.s3_fixtures import S3Server
from tests.streamgen import generate
from tests.support.cli import replicator_argv, tail
from tests.support.env import cli_env

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    state = tmp_path_factory.mktemp("spark-cluster")
    handle = start(state, free_ports(1)[0])
    pids = (handle.master_pid, *handle.worker_pids)
    try:
        yield handle
    finally:
        assert stop(state)
        assert not [p for p in pids if pid_alive(p)], "cluster-down left a master or worker running"
        assert status(state) is None


def test_up_starts_a_master_and_two_workers_once(cluster: ClusterHandle) -> None:
    assert cluster.master_url.startswith("spark://127.0.0.1:")
    info = master_state(cluster.webui_port)
    assert info["status"] == "ALIVE"
    assert info["aliveworkers"] == 2
    assert info["cores"] == 2
    again = start(cluster.state_dir, int(cluster.master_url.rsplit(":", 1)[1]))
    assert again.already_running and again.master_pid == cluster.master_pid
    running = status(cluster.state_dir)
    assert running is not None and running.master_url == cluster.master_url


def test_replicator_runs_on_the_cluster(cluster: ClusterHandle, kafka_bootstrap: str, spark: Any,
                                        tmp_path: Path) -> None:
    stream = generate(seed=23, n_txn=40, n_partitions=2, n_tables=2)
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, stream_records(stream.partitions, "open"))
    wh = tmp_path / "wh"
    log = tmp_path / "run.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                          "--protocol", "open", "--warehouse", str(wh), "--until-caught-up")
    with log.open("wb") as err:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=600,
                              env=cli_env(REPLICATOR_SPARK_MASTER=cluster.master_url))
    assert done.returncode == 0, tail(log)
    assert_model_state(spark, wh, stream.expected, "a run on the standalone cluster")
    apps = master_state(cluster.webui_port)["completedapps"]
    assert any(a["name"] == "replicator" for a in apps), apps
    # Each worker starts the application's executor in a directory of its own work dir.
    assert any((cluster.state_dir / f"work-{i}").glob("app-*/*/stderr") for i in range(2))


@pytest.mark.soak  # CI time: `make soak` (the cluster, and the Spark reader on local executors, each run in CI)
def test_spark_reader_on_the_cluster_equals_the_driver_reader(cluster: ClusterHandle, kafka_bootstrap: str,
                                                              spark: Any, tmp_path: Path) -> None:
    """`--reader spark` with the records read and decoded by the workers' executors: the same
    tables and progress as the driver reader in this process, both as the simulator says."""
    from replicator.sim.simcheck import check_warehouse
    from replicator.sim.simulate import SimConfig, Simulation
    from tests.integration.helpers import run_engine
    from tests.integration.test_spark_reader import _progress

    sim = Simulation(SimConfig(protocol="craft", seed=61, events=1200, partitions=2, tables=3, ddl="auto"))
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, list(sim.messages()))
    on_cluster, driver = tmp_path / "cluster", tmp_path / "driver"
    log = tmp_path / "run.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "craft",
                          "--warehouse", str(on_cluster), "--until-caught-up", "--reader", "spark")
    with log.open("wb") as err:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=600,
                              env=cli_env(REPLICATOR_SPARK_MASTER=cluster.master_url))
    assert done.returncode == 0, tail(log)
    run_engine(kafka_bootstrap, topic, driver, spark, protocol="craft")
    assert check_warehouse(spark, on_cluster, sim.expected) == []
    assert _progress(on_cluster) == _progress(driver)
    # The run's application had an executor on each worker (its newest app directory in each work dir).
    for i in range(2):
        apps = sorted((cluster.state_dir / f"work-{i}").glob("app-*"), key=lambda p: p.stat().st_mtime)
        assert apps and list(apps[-1].glob("*/stderr")), f"worker {i} ran no executor"


@pytest.mark.soak  # CI time: `make soak` (the cluster and s3a:// each run in CI)
def test_spark_reader_on_the_cluster_into_an_object_store(cluster: ClusterHandle, kafka_bootstrap: str, spark: Any,
                                                          s3_store: S3Server) -> None:
    """`--reader spark` on the workers' executors into an `s3a://` warehouse: the executors write the
    Delta files to the store themselves (credentials reach them through the run's environment)."""
    from replicator.sim.simcheck import check_warehouse
    from replicator.sim.simulate import SimConfig, Simulation

    sim = Simulation(SimConfig(protocol="craft", seed=63, events=300, partitions=2, tables=3, ddl="auto"))
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, list(sim.messages()))
    url = s3_store.warehouse_url("cluster")
    log = Path(cluster.state_dir) / "s3-run.log"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                          "--protocol", "craft", "--warehouse", url, "--until-caught-up", "--reader", "spark")
    with log.open("wb") as err:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=600,
                              env=cli_env(**s3_store.env(), REPLICATOR_SPARK_MASTER=cluster.master_url))
    assert done.returncode == 0, tail(log)
    assert check_warehouse(spark, url, sim.expected) == []
    apps = sorted((cluster.state_dir / "work-0").glob("app-*"), key=lambda p: p.stat().st_mtime)
    assert apps and list(apps[-1].glob("*/stderr")), "no executor ran the run"
