"""`replicator capture`: archive a topic's records into rotating framed files."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from replicator.cli.common import add_config, add_store_access, settings_from
from replicator.cli.settings import CaptureCommand, ReplicatorSettings, defaults


def register(sub: Any) -> None:
    p = sub.add_parser("capture", help="archive a topic's records into rotating framed files")
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers HOST:PORT[,HOST:PORT]")
    p.add_argument("--topic", help="topic to capture")
    p.add_argument("--out", required=True, metavar="DIR|URL",
                   help="archive directory, or object-store prefix such as s3a://bucket/prefix (files staged "
                        "locally, each put as one object once complete)")
    p.add_argument("--protocol", choices=["open", "craft", "canal-json", "simple"],
                   help="recorded in each archived record (default: detected from the first record's key)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-earliest", action="store_true", help="from the earliest retained offsets")
    start.add_argument("--from-offsets", metavar="P=O[,P=O...]", help="from these offsets")
    p.add_argument("--until-caught-up", action="store_true", default=None, help="stop at the end offsets seen at start")
    p.add_argument("--rotate-bytes", type=int, help="start a new archive file past this size")
    p.add_argument("--group-id", help="Kafka consumer group for offset commits")
    p.add_argument("--kafka-retry-budget", type=float, metavar="SECONDS",
                   help="stop (non-zero, nothing lost) once the broker has been unreachable this long "
                        "(at start: at most 30) "
                        f"(default {defaults(ReplicatorSettings)['kafka_retry_budget']:g})")
    add_store_access(p)
    add_config(p)
    p.set_defaults(handler=lambda ns: capture(CaptureCommand(
        settings=settings_from(ns), out=ns.out, from_earliest=ns.from_earliest, from_offsets=ns.from_offsets)))


def capture(cmd: CaptureCommand) -> int:
    """Capture until caught up (or a signal), then print the summary."""
    from replicator.sources.capture import CaptureOptions
    from replicator.sources.capture import capture as run_capture
    from replicator.sources.kafka import parse_offsets
    from replicator.storage import is_url

    s = cmd.settings
    topic = s.one_topic()
    start: Literal["resume", "earliest"] | Mapping[int, int] = "resume"
    if cmd.from_earliest:
        start = "earliest"
    elif cmd.from_offsets:
        start = {tp.partition: o for tp, o in parse_offsets(cmd.from_offsets, [topic]).items()}
    summary = run_capture(CaptureOptions(
        bootstrap_servers=s.require("bootstrap_servers"),
        topic=topic,
        out=cmd.out if is_url(cmd.out) else Path(cmd.out),
        protocol=s.protocol,
        start=start,
        until_caught_up=s.until_caught_up,
        rotate_bytes=s.rotate_bytes,
        group_id=s.group_id_for(topic, prefix="replicator-capture"),
        security=s.kafka_security(),
        retry_budget_s=s.kafka_retry_budget,
    ))
    sys.stdout.write(summary.render() + "\n")
    return 0
