"""The "other process" of the catalog tests: opens a warehouse the way a notebook does
(`open_warehouse`, which connects to the metastore the warehouse records) and answers commands on
stdin with one JSON line each:

    look PREFIX   the databases named PREFIX* and their tables' rows:
                  {"databases": [...], "tables": {"db.table": [rows as JSON, sorted]}}
    drop NAME     DROP TABLE NAME (a registration dropped by hand; an external table: files stay)
    name S.T      the catalog name of the live table S.T and whether this session uses the catalog
    epoch DB      the lease epoch the warehouse's runs stamped on database DB: {"epoch": N}
    sync N        a catalog sync of the warehouse's state as a run of lease epoch N would make it:
                  {"changes": [...]} or {"refused": "..."} (a stale holder)

Run as `python -m tests.integration.catalog_reader WAREHOUSE` from the repository root.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _rows(spark: Any, name: str) -> list[str]:
    spark.sql(f"REFRESH TABLE {name}")
    return sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in spark.table(name).collect())


def main() -> None:
    from replicator.delta.catalog import CatalogConfig, CatalogSync
    from replicator.delta.explore import open_warehouse
    from replicator.errors import LeaseLostError
    from replicator.warehouse import Warehouse

    ex = open_warehouse(sys.argv[1])
    spark = ex.spark
    wh = Warehouse(sys.argv[1])

    def syncer(epoch: int) -> CatalogSync:
        config = CatalogConfig.from_json(wh.load_state().catalog or {})
        return CatalogSync(spark, config, wh.root, epoch=lambda: epoch, lease=wh.lease_path.path)

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "look":
            dbs = sorted(r[0] for r in spark.sql("SHOW DATABASES").collect() if r[0].startswith(arg))
            tables = {f"{db}.{r.tableName}": _rows(spark, f"`{db}`.`{r.tableName}`")
                      for db in dbs for r in spark.sql(f"SHOW TABLES IN `{db}`").collect()}
            print(json.dumps({"databases": dbs, "tables": tables}), flush=True)
        elif cmd == "drop":
            spark.sql(f"DROP TABLE {arg}")
            print(json.dumps({"dropped": arg}), flush=True)
        elif cmd == "name":
            print(json.dumps({"name": ex.catalog_name(arg), "uses_catalog": ex.uses_catalog}), flush=True)
        elif cmd == "epoch":
            print(json.dumps({"epoch": syncer(0).epoch_of(arg)}), flush=True)
        elif cmd == "sync":
            try:
                print(json.dumps({"changes": syncer(int(arg)).sync(wh.load_state())}), flush=True)
            except LeaseLostError as exc:
                print(json.dumps({"refused": str(exc)}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {cmd!r}"}), flush=True)


if __name__ == "__main__":
    main()
