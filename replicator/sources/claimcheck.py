"""Resolving TiCDC claim-check references at the edge: the referenced message is read by its file
name from `--claim-check-storage` (a local directory or any warehouse URL: replicator/storage),
unpacked (codec/large.py) and decoded by the topic's own codec, as if it had come from Kafka.

Protocol-agnostic: a codec marks a reference by decoding it to a `RowChange` whose `claim_check` is
the location TiCDC wrote (Open Protocol key `ccl`; canal-json `_tidb.claimCheckLocation` and
Simple `claimCheckLocation` map to the same field). Anything that goes wrong with the file is a
`ClaimCheckError` naming the position, the file's URL and what to do: it stops the run.
"""

from __future__ import annotations

from collections.abc import Callable

from replicator.codec import Codec
from replicator.codec.large import claim_check_name, parse_claim_check
from replicator.codec.values import DecodeOptions
from replicator.errors import ClaimCheckError, DecodeError, ReplicatorError
from replicator.events import Event, Position, RowChange

Reader = Callable[[str], bytes | None]
"""A file name -> its bytes (None: no such file)."""


def storage_reader(url: str) -> tuple[Reader, Callable[[str], str]]:
    """(read a file name from the storage at `url`, the file's full URL) through replicator/storage."""
    from replicator.storage.fileio import normalise_root
    from replicator.storage.stores import fileio_for

    root = normalise_root(url)
    io = fileio_for(root)

    def path(name: str) -> str:
        return io.join(root, name)

    return (lambda name: io.read(path(name))), path


class ClaimChecks:
    """Replaces each claim-check reference among a message's events by the row its file holds."""

    def __init__(self, storage: str | None, codec: Codec, options: DecodeOptions,
                 reader: tuple[Reader, Callable[[str], str]] | None = None) -> None:
        self.storage = storage
        self.codec = codec
        self.options = options
        self._reader = reader if reader is not None or storage is None else storage_reader(storage)
        self.resolved = 0

    def resolve(self, events: list[Event], position: Position) -> list[Event]:
        if not any(isinstance(ev, RowChange) and ev.claim_check for ev in events):
            return events
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, RowChange) and ev.claim_check:
                out.append(self._row(ev, position))
            else:
                out.append(ev)
        return out

    def _row(self, ref: RowChange, position: Position) -> RowChange:
        location = ref.claim_check or ""
        what = (f"claim-check reference {location!r} of a {ref.schema}.{ref.table} row at ts {ref.commit_ts} "
                f"({position})")
        if self._reader is None:
            raise ClaimCheckError(
                f"{what}: the row is in TiCDC's claim-check storage, and no --claim-check-storage is set: run with "
                "--claim-check-storage <the changefeed's claim-check-storage-uri> (a directory or a URL)")
        read, url_of = self._reader
        try:
            name = claim_check_name(location)
        except DecodeError as exc:
            raise ClaimCheckError(f"{what}: {exc.what}") from None
        url = url_of(name)
        try:
            data = read(name)
        except (OSError, ReplicatorError) as exc:
            raise ClaimCheckError(f"{what}: cannot read {url}: {exc}; check --claim-check-storage and access to it, "
                                  "then run again (nothing past this message was applied)") from None
        if data is None:
            raise ClaimCheckError(
                f"{what}: no file {url}; is --claim-check-storage the changefeed's claim-check-storage-uri? TiCDC "
                "never deletes these files: restore it (or point --claim-check-storage at its copy) and run again "
                "(nothing past this message was applied)")
        try:
            key, value = parse_claim_check(data)
            # decoded as Kafka's messages are: same compression, zone, ...
            events = self.codec.decode(key or None, value, options=self.options, position=position)
        except DecodeError as exc:
            raise ClaimCheckError(f"{what}: file {url} does not hold a message that decodes: {exc}") from None
        rows = [ev for ev in events if isinstance(ev, RowChange)]
        if len(rows) != 1 or len(events) != 1:
            raise ClaimCheckError(f"{what}: file {url} holds {len(events)} events, not the one referenced row")
        row = rows[0]
        if (row.commit_ts, row.schema, row.table) != (ref.commit_ts, ref.schema, ref.table) or row.claim_check:
            raise ClaimCheckError(
                f"{what}: file {url} holds a {row.schema}.{row.table} row at ts {row.commit_ts}, "
                "not the referenced one")
        self.resolved += 1
        return row
