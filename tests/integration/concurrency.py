"""A concurrent user's commit injected at a chosen instant inside one of our Delta statements."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from replicator.mysql.tokens import quote_ident as q


class CommitDuringScan:
    """A concurrent user's commit injected *inside* one of our statements' Delta transaction.

    The statement (a binlog DELETE / UPDATE, or the engine's MERGE with its source gated) calls
    the UDF ``gate``: its first call (in a Spark task, after Delta took the statement's snapshot
    and the files it reads) signals `started` and waits for `committed`; a driver thread waits for
    `started`, OPTIMIZEs the table from its own session (removing the files the statement read)
    and signals `committed`. The statement's commit then meets the user's:
    Delta rejects it, deterministically, and the applier must re-run it. Later calls pass through.
    """

    def __init__(self, spark: Any, path: Path) -> None:
        self.started, self.committed, self.first = path / "started", path / "committed", path / "first"
        self.session = spark.newSession()
        started, committed, first = str(self.started), str(self.committed), str(self.first)

        def gate(x: int) -> int:
            import os
            import time

            try:
                os.close(os.open(first, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return x
            open(started, "w").close()
            for _ in range(6000):  # a bound, not a timing: the driver answers as soon as it committed
                if os.path.exists(committed):
                    break
                time.sleep(0.1)
            return x

        self.gate = gate
        self.register(spark)
        self.ops: list[str] = []
        self.failure: BaseException | None = None
        self.path = ""  # the table to OPTIMIZE when `user` is not told: set by whoever gates a statement

    def register(self, spark: Any) -> None:
        """Make the UDF `gate` callable from `spark` (a session of its own has its own functions)."""
        spark.udf.register("gate", self.gate, "int")

    def user(self, table_path: str = "", zorder_by: str = "") -> None:
        """OPTIMIZE the table once the gate holds its statement (ZORDER BY `zorder_by` rewrites
        even a table of one file, so there is always a file removed under the statement)."""
        try:
            while not self.started.exists():
                if self.committed.exists():  # the statement ended without ever calling the gate
                    return
                time.sleep(0.05)
            order = f" ZORDER BY ({q(zorder_by)})" if zorder_by else ""
            statement = f"OPTIMIZE delta.{q(table_path or self.path)}{order}"
            metrics = self.session.sql(statement).collect()[0]["metrics"]
            self.ops.append(f"OPTIMIZE removed {metrics['numFilesRemoved']} file(s)")
        except BaseException as exc:
            self.failure = exc
        finally:
            self.committed.touch()
