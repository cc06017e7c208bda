"""`replicator jars`: the JVM jars a replicator Spark session needs, fetched and listed.

For a machine without a checkout: fill a directory for REPLICATOR_SPARK_JARS, pass the jars to
spark-submit (`--jars "$(replicator jars --kafka)"`), or give a Maven proxy the same list as a pom.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.runtime import jars


@dataclass(frozen=True)
class JarsCommand:
    """`replicator jars`."""

    groups: tuple[str, ...] = ("delta",)
    into: str | None = None
    pom: bool = False
    separator: str = ","
    repository: str | None = field(default=None)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "jars", help="fetch the JVM jars a Spark session of the replicator needs and print their paths",
        description="Fetch the declared jars (Delta always; --kafka: Spark's Kafka source for --reader spark; "
                    "--s3: S3A for s3a:// warehouses) from Maven Central (or REPLICATOR_MAVEN_REPOSITORY), "
                    "verified by SHA-1, and print their paths, comma-separated (for spark-submit --jars).")
    p.add_argument("--kafka", action="store_true", help="Spark's Kafka source (--reader spark)")
    p.add_argument("--s3", action="store_true", help="Hadoop's S3A and the AWS SDK (s3a:// warehouses)")
    p.add_argument("--all", action="store_true", help="every group (what `make spark-jars` caches)")
    p.add_argument("--into", metavar="DIR",
                   help="directory to fill (default: the per-user jar cache, REPLICATOR_JARS_CACHE)")
    p.add_argument("--repository", metavar="URL", help="Maven repository (default: REPLICATOR_MAVEN_REPOSITORY, "
                                                       "else Maven Central)")
    p.add_argument("--lines", action="store_true", help="one path per line instead of comma-separated")
    p.add_argument("--pom", action="store_true", help="print the same jars as a Maven pom instead (fetches nothing)")
    p.set_defaults(handler=lambda ns: run_jars(JarsCommand(
        groups=jars.ALL_GROUPS if ns.all else tuple(g for g, on in (("delta", True), ("kafka", ns.kafka),
                                                                     ("s3", ns.s3)) if on),
        into=ns.into, pom=ns.pom, separator="\n" if ns.lines else ",", repository=ns.repository)))


def run_jars(cmd: JarsCommand) -> int:
    if cmd.pom:
        sys.stdout.write(jars.pom(cmd.groups))
        return 0
    into = Path(cmd.into).expanduser() if cmd.into else jars.cache_dir()
    paths = jars.fetch(cmd.groups, into, repo=cmd.repository)
    sys.stdout.write(cmd.separator.join(str(p.resolve()) for p in paths) + "\n")
    return 0
