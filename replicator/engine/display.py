"""The run's progress on stderr: a live line on a terminal, periodic log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from replicator.engine.loop import ControlLoop
from replicator.events import tso_physical_ms
from replicator.logformat import json_logs

log = logging.getLogger("replicator")



class Display:
    """A live line on a terminal (events/s, watermark, lag); periodic log lines otherwise, and the
    last state as a last line when the run ends normally."""

    def __init__(self, loop: ControlLoop, enabled: bool | None) -> None:
        self.loop = loop
        # JSON log lines (--log-format json): nothing else on stderr, the progress goes as log lines.
        self.live = not json_logs() and (sys.stderr.isatty() if enabled is None else enabled)
        self._last_log = 0.0
        self._unlogged = False  # an update since the last line logged
        self._started = time.monotonic()
        self._status: Any = None

    def __enter__(self) -> Display:
        if self.live:
            from rich.console import Console

            self._status = Console(stderr=True).status(self._text())
            self._status.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
        elif self._unlogged and exc_type is None:
            log.info("%s", self._text(), extra=self._fields())

    def _text(self) -> str:
        # The loop's own windower and source: the Spark reader makes a windower per batch, and
        # its source measures the Kafka lag from where the batches read to (engine/batch.py).
        s, windower = self.loop.counts, self.loop.windower
        el = max(time.monotonic() - self._started, 1e-6)
        wm = windower.applied_ts
        lag = f"{max(0.0, time.time() - tso_physical_ms(wm) / 1000):.0f}s" if wm else "n/a"
        kafka_lag = self.loop.source.lag()
        spilled = f" (+{windower.spilled_rows} spilled)" if windower.spilled_rows else ""
        return (f"{s.records} records ({s.events / el:,.0f} events/s) | applied watermark {wm} | lag {lag}"
                f" | buffered {windower.buffered_rows}{spilled} | kafka lag "
                f"{kafka_lag if kafka_lag is not None else '?'}")

    def _fields(self) -> dict[str, Any]:
        """The progress line's structured fields (--log-format json)."""
        s, windower = self.loop.counts, self.loop.windower
        el = max(time.monotonic() - self._started, 1e-6)
        wm = windower.applied_ts
        return {"step": s.steps, "watermark": wm,
                "counts": {"records": s.records, "events": s.events, "events_per_s": round(s.events / el, 1),
                           "buffered_rows": windower.buffered_rows, "dead_letters": s.dead_letters,
                           "kafka_lag": self.loop.source.lag(),
                           "lag_s": round(max(0.0, time.time() - tso_physical_ms(wm) / 1000), 1) if wm else None}}

    def update(self) -> None:
        if self._status is not None:
            self._status.update(self._text())
        elif time.monotonic() - self._last_log >= 5.0:
            self._last_log = time.monotonic()
            self._unlogged = False
            log.info("%s", self._text(), extra=self._fields())
        else:
            self._unlogged = True
