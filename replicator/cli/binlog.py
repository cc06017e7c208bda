"""`replicator binlog write|read`: the statement-based protobuf binary log."""

from __future__ import annotations

import sys
from typing import IO, Any

from replicator.cli.settings import BinlogReadCommand, BinlogWriteCommand, defaults
from replicator.errors import ConfigError


def register(sub: Any) -> None:
    d = defaults(BinlogWriteCommand)
    p = sub.add_parser("binlog", help="the statement-based protobuf binary log")
    actions = p.add_subparsers(dest="binlog_command", metavar="ACTION", required=True)
    w = actions.add_parser("write", help="append a Query (or Commit/Rollback) event")
    w.add_argument("--file", default=d["file"], help=f"binlog file (default {d['file']})")
    w.add_argument("--trans", type=int, required=True, help="transaction id")
    w.add_argument("--server-id", type=int, default=d["server_id"], help=f"server id (default {d['server_id']})")
    w.add_argument("--session-id", type=int, default=d["session_id"], help=f"session id (default {d['session_id']})")
    w.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="session variable")
    what = w.add_mutually_exclusive_group()
    what.add_argument("--commit", action="store_true", help="append a Commit event")
    what.add_argument("--rollback", action="store_true", help="append a Rollback event")
    w.add_argument("query", nargs="?", help="the SQL statement")
    w.set_defaults(handler=lambda ns: binlog_write(BinlogWriteCommand(
        file=ns.file, trans=ns.trans, server_id=ns.server_id, session_id=ns.session_id, sets=tuple(ns.set),
        commit=ns.commit, rollback=ns.rollback, query=ns.query)))
    r = actions.add_parser("read", help="print events in the seed's shape, following Chain events")
    r.add_argument("paths", nargs="*", metavar="FILE", help=f"binlog files (default {d['file']})")
    r.add_argument("--verbose", action="store_true", help="also print Start/Chain events")
    r.set_defaults(handler=lambda ns: binlog_read(
        BinlogReadCommand(paths=tuple(ns.paths) or BinlogReadCommand.paths, verbose=ns.verbose)))


def binlog_write(cmd: BinlogWriteCommand) -> int:
    """Append exactly one of a statement (with its session variables), a Commit or a Rollback."""
    from replicator.formats.binlog import BinlogWriter, parse_set

    if sum((cmd.query is not None, cmd.commit, cmd.rollback)) != 1:
        raise ConfigError("binlog write needs exactly one of a SQL statement, --commit or --rollback")
    if cmd.sets and cmd.query is None:
        raise ConfigError("--set only applies to a statement")
    for flag, v in (("--trans", cmd.trans), ("--server-id", cmd.server_id), ("--session-id", cmd.session_id)):
        if not 0 <= v < 1 << 32:
            raise ConfigError(f"{flag} {v} outside 0..{(1 << 32) - 1}")
    variables = parse_set(cmd.sets)
    if cmd.query is not None and not cmd.query.strip():
        raise ConfigError("empty SQL statement")
    with BinlogWriter(cmd.file, server_id=cmd.server_id, rotate_bytes=cmd.rotate_bytes) as w:
        if cmd.query is not None:
            w.write_query(cmd.trans, cmd.query, variables, session_id=cmd.session_id)
        elif cmd.commit:
            w.write_commit(cmd.trans)
        else:
            w.write_rollback(cmd.trans)
    return 0


def binlog_read(cmd: BinlogReadCommand, out: IO[str] | None = None) -> int:
    """Print events in the seed's shape. Start and Chain (the seed's storage-control events) only
    with verbose, so the default output is exactly the seed's. Errors propagate after the events
    before them were printed."""
    from replicator.formats.binlog import format_event, read_binlog

    stream = out if out is not None else sys.stdout
    for event in read_binlog(list(cmd.paths)):
        if event.type in ("Start", "Chain") and not cmd.verbose:
            continue
        if cmd.verbose:
            print(f"# at {event.file}:{event.offset}", file=stream)
        print(format_event(event.message), file=stream)
    return 0
