"""`replicator spark-conf`: the jars and confs a user's own Spark job (an OPTIMIZE, a VACUUM, a
backfill) needs to write a warehouse as safely as the replicator does, as spark-submit flags and
as a Python `SparkSession.builder` snippet (replicator/runtime/writerconf.py says why)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from replicator.cli.common import add_config, add_storage, settings_from
from replicator.cli.settings import ReplicatorSettings

FORMS = ("both", "spark-submit", "python")


@dataclass(frozen=True)
class SparkConfCommand:
    """`replicator spark-conf`."""

    settings: ReplicatorSettings
    form: str = "both"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spark-conf", help="print the --jars / --conf a Spark job of your own needs to write a warehouse safely",
        description="Print what a Spark job of your own (an OPTIMIZE or VACUUM of a table, a backfill) needs to "
                    "write the warehouse beside the replicator: Delta, and for s3a:// the replicator's "
                    "conditional commit store and the same S3A settings (--s3-endpoint, --s3-path-style, "
                    "the config file's [spark] table), as spark-submit flags and as a Python SparkSession.builder "
                    "snippet. Without it a job's commit can replace one of the replicator's "
                    "(docs/object-store.md).")
    add_storage(p)
    p.add_argument("--form", choices=FORMS, default="both",
                   help="both (default, with comments saying why), or only the spark-submit flags or only the "
                        "Python snippet (for scripts)")
    add_config(p)
    p.set_defaults(handler=lambda ns: spark_conf(SparkConfCommand(settings=settings_from(ns), form=ns.form)))


def spark_conf(cmd: SparkConfCommand) -> int:
    from replicator.runtime.writerconf import render, writer_conf
    from replicator.storage import normalise_root

    wc = writer_conf(normalise_root(cmd.settings.require("warehouse")))
    sys.stdout.write(render(wc, cmd.form))
    if wc.withheld and cmd.form != "both":
        sys.stderr.write(f"replicator spark-conf: not printed (secrets of the config file's [spark] table): "
                         f"{', '.join(wc.withheld)}; give them to the job as it gets its credentials\n")
    return 0
