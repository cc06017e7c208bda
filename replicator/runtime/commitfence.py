"""The writer lease, enforced inside the driver JVM for Delta commits on s3a://.

`replicator.s3commit.ConditionalS3LogStore` (runtime/java/s3commit) writes each commit file with
`If-None-Match: *` and, before that, asks `replicator.s3commit.Fence` whether this JVM may still
commit. `arm` keeps that fence in step with the lease: after every renewal it is armed with the
time left before the lease's monotonic deadline; when the lease is lost the fence closes and the
run's Spark jobs are cancelled, so no commit of this process can land once a taker may start.

`replicator.s3commit.Pin` holds, per table, the version its next data commit from this JVM must
have: the one after the version whose log gave the table's applied ts (`pins`, used by
delta/session.py). A commit of anyone else in between makes the data write fail as a lost race
instead of landing on top of it; the applier re-reads the log and re-plans.
"""

from __future__ import annotations

import functools
import math
import time
from typing import TYPE_CHECKING, Any

from replicator.errors import ConfigError
from replicator.runtime import jars
from replicator.storage.lease import Lease
from replicator.storage.options import CONDITIONAL_ENV, storage_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG_STORE_CONF = "spark.delta.logStore.s3a.impl"


def uses_commit_store(spark: SparkSession) -> bool:
    return spark.conf.get(LOG_STORE_CONF, None) == jars.COMMIT_STORE_CLASS


def pins(spark: SparkSession) -> Any | None:
    """The JVM's `Pin` class (readAt, guard, unguard, next) when the session commits s3a:// tables
    through the replicator's commit store; None otherwise (nothing to pin)."""
    if not uses_commit_store(spark):
        return None
    return functools.reduce(getattr, jars.PIN_CLASS.split("."), spark.sparkContext._jvm)


def arm(spark: SparkSession, lease: Lease, warehouse: str) -> None:
    """Fence this session's Delta commits on s3a by `lease`; refuse a session without the commit
    store unless conditional writes were turned off (one writer ensured otherwise)."""
    if not uses_commit_store(spark):
        if storage_options().conditional_writes:
            raise ConfigError(
                f"the Spark session has no replicator commit store for s3a:// ({LOG_STORE_CONF} is "
                f"{spark.conf.get(LOG_STORE_CONF, None) or 'unset'}), so two runs on {warehouse} could overwrite each "
                f"other's Delta commits; run with the replicator's own jars (`replicator jars --s3 --into DIR`, which "
                f"builds {jars.COMMIT_STORE_JAR} with a JDK's javac; under spark-submit pass it with --jars and --conf "
                f"{LOG_STORE_CONF}={jars.COMMIT_STORE_CLASS}), or pass --s3-conditional-writes false "
                f"({CONDITIONAL_ENV}=false) if one writer per warehouse is ensured otherwise")
        return
    jvm: Any = spark.sparkContext._jvm
    fence = functools.reduce(getattr, jars.FENCE_CLASS.split("."), jvm)
    context = spark.sparkContext

    def heard(deadline: float | None) -> None:
        if deadline is None:
            fence.lose(f"the writer lease of {warehouse} was lost")
            context.cancelAllJobs()
        elif math.isinf(deadline):
            fence.disarm()
        else:
            fence.holdFor(int(max(0.0, deadline - time.monotonic()) * 1e9))

    lease.on_change(heard)
