"""`replicator simulate`: produce (or archive) a realistic TiCDC stream and write its expected final tables."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from replicator.cli.common import add_config, add_store_access, settings_from
from replicator.cli.settings import SimulateCommand, defaults, options
from replicator.errors import ConfigError

log = logging.getLogger("replicator.cli.simulate")


def register(sub: Any) -> None:
    d = defaults(SimulateCommand)
    p = sub.add_parser("simulate", help="generate a realistic TiCDC stream plus its expected final tables")
    p.add_argument("--protocol", choices=["open", "craft", "canal-json", "simple", "csv"], required=True)
    p.add_argument("--topic", help="produce into this topic (with --bootstrap-servers)")
    p.add_argument("--storage-sink", metavar="DIR|URL",
                   help="write the changefeed as TiCDC's storage sink (csv or canal-json files, a directory or "
                        "s3a://bucket/prefix) instead of producing")
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers")
    p.add_argument("--out", metavar="DIR", help="write an archive directory instead of producing")
    p.add_argument("--seed", type=int, help=f"random seed (same seed, same stream; default {d['seed']})")
    p.add_argument("--events", type=int, help=f"number of row changes (default {d['events']})")
    p.add_argument("--partitions", type=int, help=f"Kafka partitions (default {d['partitions']})")
    p.add_argument("--tables", type=int, help=f"number of tables (default {d['tables']})")
    p.add_argument("--expected", metavar="FILE", help="where to write the expected final tables (JSON)")
    p.add_argument("--ddl", metavar="KINDS",
                   help=f"mid-stream DDL: auto (what this build applies), all, none, or a comma list of "
                        f"create_schema,add_column,modify_column,truncate,drop_column,drop_table,rename_table "
                        f"(default {d['ddl']})")
    p.add_argument("--compression", choices=["none", "lz4", "snappy"],
                   help="TiCDC large-message-handle-compression: compress every message value "
                        f"(open, canal-json, simple; default {d['compression']})")
    p.add_argument("--claim-check-dir", metavar="DIR",
                   help="TiCDC claim-check: write rows whose message exceeds --max-message-bytes to DIR and send "
                        "references to them (open, canal-json, simple; replicate with --claim-check-storage DIR)")
    p.add_argument("--max-message-bytes", type=int, metavar="BYTES",
                   help=f"TiCDC's max-message-bytes (default {d['max_message_bytes']})")
    add_store_access(p)  # --storage-sink s3a://...: how to reach the store
    add_config(p)
    p.set_defaults(handler=_simulate)


def _simulate(ns: argparse.Namespace) -> int:
    from replicator.storage import is_url

    if ns.storage_sink and is_url(ns.storage_sink):
        settings_from(ns)  # how to reach the store
    return simulate(options(SimulateCommand, vars(ns)))


def simulate(cmd: SimulateCommand) -> int:
    """Generate the stream, write it to Kafka or an archive, write the expected tables, print a summary."""
    from replicator.sim.simulate import SimConfig, Simulation, produce, write_archive

    if cmd.storage_sink or cmd.protocol == "csv":
        return simulate_storage_sink(cmd)
    if cmd.out and cmd.bootstrap_servers:
        raise ConfigError("give either --topic with --bootstrap-servers (produce to Kafka) or --out DIR, not both")
    if not cmd.out and not (cmd.topic and cmd.bootstrap_servers):
        raise ConfigError("give --topic with --bootstrap-servers (produce to Kafka) or --out DIR (write an archive)")
    config = SimConfig(protocol=cmd.protocol, seed=cmd.seed, events=cmd.events, partitions=cmd.partitions,
                       tables=cmd.tables, ddl=cmd.ddl, compression=cmd.compression,
                       claim_check_dir=cmd.claim_check_dir, max_message_bytes=cmd.max_message_bytes)
    sim = Simulation(config)
    if cmd.out:
        report = write_archive(sim, cmd.out, cmd.topic or "simulated")
        expected_path = Path(cmd.expected or Path(cmd.out) / "expected.json")
    else:
        assert cmd.topic is not None and cmd.bootstrap_servers is not None
        report = produce(sim, cmd.bootstrap_servers, cmd.topic, progress=lambda n: log.info("produced %d records", n))
        expected_path = Path(cmd.expected or f"expected-{cmd.topic}.json")
    sim.expected.write(expected_path)
    st = sim.stats
    out = sys.stdout
    out.write(f"simulated {st.row_changes} row changes in {st.transactions} transactions ({config.protocol}, "
              f"seed {config.seed}) -> {report.target}: {report.total} records in {report.elapsed_s:.1f}s\n")
    out.write(f"  inserts {st.inserts}, updates {st.updates}, deletes {st.deletes}, key changes {st.key_changes}, "
              f"DDL {st.ddl} ({', '.join(sim.ddl_kinds)}), resolved {st.resolved}, "
              f"replayed {st.replayed_events} ({st.retries} retries, {st.restarts} restarts)\n")
    if config.compression != "none" or config.claim_check_dir:
        out.write(f"  values compressed: {config.compression}; claim-check files: {sim.claim_check_files}"
                  f"{' in ' + config.claim_check_dir if config.claim_check_dir else ''}\n")
    for p, n in sorted(report.records.items()):
        out.write(f"  partition {p}: {n} records\n")
    for name, rows in sorted(sim.expected.tables.items()):
        out.write(f"  {name}: {len(rows)} rows expected\n")
    out.write(f"expected final tables: {expected_path}\n")
    return 0


def simulate_storage_sink(cmd: SimulateCommand) -> int:
    """`simulate --storage-sink DIR|URL`: the stream as TiCDC's storage sink writes it, and its expected tables."""
    from replicator.sim.simulate import SimConfig, Simulation
    from replicator.sim.storage_sink import StorageLayout, write_storage_sink

    if not cmd.storage_sink or cmd.out or cmd.topic or cmd.bootstrap_servers:
        raise ConfigError("--protocol csv writes a storage sink: give --storage-sink DIR|URL (and no --topic, "
                          "--bootstrap-servers or --out)")
    if cmd.protocol not in ("csv", "canal-json"):
        raise ConfigError(f"a storage sink is written as csv or canal-json, not {cmd.protocol}")
    # the model broadcasts DDL to every partition (the sink writes each once)
    config = SimConfig(protocol="open", seed=cmd.seed, events=cmd.events, partitions=cmd.partitions,
                       tables=cmd.tables, ddl=cmd.ddl)
    sim = Simulation(config)
    layout = StorageLayout(protocol="csv" if cmd.protocol == "csv" else "canal-json")
    report = write_storage_sink(sim, cmd.storage_sink, layout)
    expected_path = Path(cmd.expected or "expected-storage-sink.json")
    sim.expected.write(expected_path)
    st = sim.stats
    sys.stdout.write(f"simulated {st.row_changes} row changes in {st.transactions} transactions (seed {config.seed}) "
                     f"-> {report.target} in {report.elapsed_s:.1f}s\n"
                     f"  DDL {st.ddl} ({', '.join(sim.ddl_kinds)}), restarts {st.restarts}\n")
    for name, rows in sorted(sim.expected.tables.items()):
        sys.stdout.write(f"  {name}: {len(rows)} rows expected\n")
    sys.stdout.write(f"expected final tables: {expected_path}\n")
    return 0
