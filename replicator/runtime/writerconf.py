"""What a user's own Spark job (an OPTIMIZE, a VACUUM, a backfill) needs to write a replicator
warehouse safely: `replicator spark-conf --warehouse W`.

Every writer of an `s3a://` warehouse must commit through a conditional log store: Delta's default
`S3SingleDriverLogStore` checks that `N.json` is absent and then PUTs it, so a job's commit can
replace one of the replicator's (docs/object-store.md "Two writers"). The confs come from the code
the replicator's own session is built with (`runtime/spark.py`, `runtime/jars.py`, the storage options'
`s3a_conf`), so a user's job writes the way the replicator does; what only the replicator's own
runs need (its sizing, its scheduler, its local file system) is left out. Secrets that a config
file's `[spark]` table holds are never printed.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from replicator.errors import ConfigError
from replicator.runtime import jars, spark
from replicator.storage.options import CONDITIONAL_ENV, storage_options

# Spark's own `spark.redaction.regex` default: values of these keys are not printed.
_SECRET = re.compile(r"(?i)secret|password|token|access[.]key")


@dataclass(frozen=True)
class WriterConf:
    """The jars and confs of a Spark job that writes `warehouse`, and what to say about them."""

    warehouse: str
    jars: list[str]
    conf: dict[str, str]
    notes: list[str] = field(default_factory=list)  # why, one sentence a line
    withheld: list[str] = field(default_factory=list)  # [spark] keys not printed (secrets)


def _declared(paths: list[str], groups: tuple[str, ...]) -> list[str]:
    """The jars of `groups` (and for s3, the commit store's) among `paths`, by artifact name (any version)."""
    names = [a.name for a in jars.artifacts(groups)]
    keep = []
    for path in paths:
        name = Path(path).name
        if (name == jars.COMMIT_STORE_JAR and "s3" in groups) or any(
                name.startswith(f"{n}-") and name[len(n) + 1:][:1].isdigit() for n in names):
            keep.append(path)
    return keep


def writer_conf(warehouse: str) -> WriterConf:
    """The configuration a user's Spark job needs to write `warehouse` (ConfigError, exit 2, when
    an `s3a://` warehouse's commit store cannot be had)."""
    on_s3 = jars.needs_s3(warehouse)
    groups: tuple[str, ...] = ("delta", "s3") if on_s3 else ("delta",)
    jars.require(*groups)
    jar_list = _declared(spark.jar_paths() or [], groups)
    conf = dict(spark.DELTA_SESSION_CONF)
    if not on_s3:
        return WriterConf(warehouse, jar_list, conf, notes=[
            f"{warehouse} is a local directory: a job needs Delta only, no log store of the replicator's "
            "(Delta's local log store renames without overwriting, so a second commit of one version is refused)."])
    options = storage_options()
    withheld = sorted(k for k in options.spark_conf if _SECRET.search(k))
    conf.update({k: v for k, v in options.s3a_conf().items() if k not in withheld})
    if not options.conditional_writes:
        return WriterConf(warehouse, [j for j in jar_list if Path(j).name != jars.COMMIT_STORE_JAR], conf, notes=[
            f"conditional writes are off (--s3-conditional-writes false, {CONDITIONAL_ENV}=false): no commit "
            f"store; only safe while one writer of {warehouse} at a time is ensured otherwise."], withheld=withheld)
    store = spark.log_store_conf(jar_list)
    if not store and not any(k.startswith("spark.delta.logStore.") for k in options.spark_conf):
        raise ConfigError(
            f"cannot give a safe configuration for {warehouse}: {jars.COMMIT_STORE_JAR} (the commit store "
            f"{jars.COMMIT_STORE_CLASS}) is not among the jars; build it with `replicator jars --s3` (it needs a "
            f"JDK's javac) or put it in {jars.JARS_DIR_ENV}")
    conf.update(store)
    return WriterConf(warehouse, jar_list, conf, notes=[
        f"Every writer of {warehouse} (an OPTIMIZE or VACUUM job included) needs a conditional log store: "
        "Delta's default S3SingleDriverLogStore checks that a commit file is absent and then PUTs it, so its "
        "commit can replace one of the replicator's.",
        f"{jars.COMMIT_STORE_CLASS} writes each commit with If-None-Match: * (of two writers of one version "
        "exactly one wins); credentials come from the standard AWS sources."], withheld=withheld)


def _comments(wc: WriterConf) -> list[str]:
    lines = [f"# {note}" for note in wc.notes]
    lines += [f"# not printed (a secret in the config file's [spark] table): {key}" for key in wc.withheld]
    return lines


def spark_submit_flags(wc: WriterConf) -> str:
    """`--jars` and `--conf` flags for spark-submit, one a line, shell-quoted."""
    flags = [f"--jars {shlex.quote(','.join(wc.jars))}"] if wc.jars else []
    flags += [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in sorted(wc.conf.items())]
    return " \\\n".join(flags) + "\n"


def builder_snippet(wc: WriterConf) -> str:
    """The same as Python: a `SparkSession.builder` chain."""
    lines = ["from pyspark.sql import SparkSession", "", "spark = (", "    SparkSession.builder"]
    if wc.jars:
        lines.append(f"    .config({json.dumps('spark.jars')}, {json.dumps(','.join(wc.jars))})")
    lines += [f"    .config({json.dumps(k)}, {json.dumps(v)})" for k, v in sorted(wc.conf.items())]
    lines += ["    .getOrCreate()", ")"]
    return "\n".join(lines) + "\n"


def render(wc: WriterConf, form: str = "both") -> str:
    """`form`: "spark-submit" or "python" alone (no comments: for scripts), or both with comments."""
    if form == "spark-submit":
        return spark_submit_flags(wc)
    if form == "python":
        return builder_snippet(wc)
    return "\n".join([*_comments(wc), "", "# spark-submit:", spark_submit_flags(wc), "# Python:",
                      builder_snippet(wc)])
