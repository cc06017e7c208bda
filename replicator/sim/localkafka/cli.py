"""``python -m replicator.sim.localkafka up|down|status`` (``make kafka-up`` / ``make kafka-down``)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from replicator.errors import ReplicatorError
from replicator.sim.localkafka.broker import start, status, stop
from replicator.sim.localkafka.config import (
    DEFAULT_LIBS,
    DEFAULT_PORT,
    DEFAULT_STATE_DIR,
    LIBS_ENV,
    PORT_ENV,
)
from replicator.sim.localkafka.process import env_port

# ---------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """``python -m replicator.sim.localkafka up|down|status``: used by ``make kafka-up`` / ``make kafka-down``."""
    parser = argparse.ArgumentParser(
        prog="python -m replicator.sim.localkafka",
        description="Run a local single-node Apache Kafka broker (KRaft) on 127.0.0.1.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    state_help = f"broker state directory (default: {DEFAULT_STATE_DIR})"
    up = sub.add_parser("up", help="start the broker (no-op if running); print the bootstrap address")
    up.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    port_help = f"client port (default: ${PORT_ENV} or {DEFAULT_PORT})"
    up.add_argument("--port", type=int, default=None, help=port_help)
    up.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: pick)")
    libs_help = f"broker jars (default: ${LIBS_ENV} or {DEFAULT_LIBS})"
    up.add_argument("--libs", type=Path, default=None, help=libs_help)
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness (default: 90)")
    down = sub.add_parser("down", help="stop the broker and wait until it is gone (no-op if not running)")
    down.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    down.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (default: 30)")
    st = sub.add_parser("status", help="print the bootstrap address and exit 0 if running, else exit 1")
    st.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="localkafka: %(message)s")

    try:
        if args.command == "up":
            port = args.port if args.port is not None else env_port(PORT_ENV, DEFAULT_PORT)
            handle = start(args.state_dir, port, args.controller_port, args.timeout, libs_dir=args.libs)
            if handle.already_running:
                note = "already running"
                if handle.port != port:
                    note += f" on port {handle.port}, not {port} (run `down` first to change it)"
                print(f"kafka: {note} (pid {handle.pid}, state {handle.state_dir})", file=sys.stderr)
            else:
                secs = handle.format_seconds
                fmt = f"formatted in {secs:.1f}s, " if secs is not None else ""
                ready = handle.ready_seconds or 0.0
                print(
                    f"kafka: started pid {handle.pid} ({fmt}ready in {ready:.1f}s); "
                    f"log {handle.state_dir / 'broker.log'}",
                    file=sys.stderr,
                )
            print(handle.bootstrap, flush=True)
            return 0
        if args.command == "down":
            stopped = stop(args.state_dir, args.timeout)
            print("kafka: stopped" if stopped else "kafka: not running", file=sys.stderr)
            return 0
        handle_or_none = status(args.state_dir)
        if handle_or_none is None:
            print("kafka: not running", file=sys.stderr)
            return 1
        print(handle_or_none.bootstrap, flush=True)
        print(f"kafka: running (pid {handle_or_none.pid}, state {handle_or_none.state_dir})", file=sys.stderr)
        return 0
    except ReplicatorError as exc:
        print(f"kafka {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
