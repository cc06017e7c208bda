"""`replicator decode`: one captured Kafka message to JSON lines."""

from __future__ import annotations

import sys
from typing import Any

from replicator.cli.common import read_input, time_zone
from replicator.cli.settings import DecodeCommand, defaults, options


def register(sub: Any) -> None:
    d = defaults(DecodeCommand)
    p = sub.add_parser("decode", help="decode one captured Kafka message to JSON lines")
    p.add_argument("--protocol", choices=["open", "craft", "canal-json", "simple"], required=True)
    p.add_argument("--value", required=True, metavar="FILE", help="message value file ('-' = stdin)")
    p.add_argument("--key", metavar="FILE", help="message key file (Open Protocol)")
    p.add_argument("--timezone", help=f"upstream time zone of TIMESTAMP values (default {d['timezone']})")
    p.add_argument("--schema", action="append", metavar="FILE",
                   help="Simple: a BOOTSTRAP or DDL message value whose table schema a DML message needs "
                        "(repeatable; read in order before --value)")
    p.add_argument("--legacy", choices=["auto", "legacy", "modern"], help=f"(default {d['legacy']})")
    p.add_argument("--compression", choices=["none", "lz4", "snappy"],
                   help=f"the changefeed's large-message-handle-compression (default {d['compression']})")
    p.set_defaults(handler=lambda ns: decode(options(DecodeCommand, {**vars(ns), "schema": tuple(ns.schema or ())})))


def decode(cmd: DecodeCommand) -> int:
    from replicator.codec import codec_for
    from replicator.codec.render import render_lines
    from replicator.codec.state import CodecState
    from replicator.codec.values import DecodeOptions
    from replicator.events import Position

    value = read_input(cmd.value)
    key = read_input(cmd.key) if cmd.key else None
    opts = DecodeOptions(timezone=time_zone(cmd.timezone), legacy=cmd.legacy, compression=cmd.compression,
                         state=CodecState())
    codec = codec_for(cmd.protocol)
    for path in cmd.schema:  # their events are not printed: they only teach the decoder schemas
        codec.decode(None, read_input(path), options=opts, position=Position(path, -1, -1))
    events = codec.decode(key, value, options=opts, position=Position(cmd.value, -1, -1))
    for line in render_lines(events):
        sys.stdout.write(line + "\n")
    return 0

