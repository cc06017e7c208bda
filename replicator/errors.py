"""One error hierarchy for the whole tool.

Every error says what went wrong, where (topic/partition/offset, byte offset, table, ...) and,
where it helps, what to do. The CLI maps `ReplicatorError` to a non-zero exit and a one-line
message; anything else is a bug and gets a traceback.
"""

from __future__ import annotations


class ReplicatorError(Exception):
    """Base of every error the tool raises on purpose."""

    exit_code: int = 1


class ConfigError(ReplicatorError):
    """Invalid or contradictory configuration / command-line flags."""

    exit_code = 2


class DecodeError(ReplicatorError):
    """A message (or archive frame) could not be decoded.

    `where` names the position inside the message (entry index, byte offset, field);
    `position` is filled in by the source with topic/partition/offset when known.
    """

    def __init__(self, what: str, *, offset: int | None = None, where: str | None = None) -> None:
        self.what = what
        self.byte_offset = offset
        self.where = where
        self.position: str | None = None
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.what]
        if self.where:
            parts.append(f"at {self.where}")
        if self.byte_offset is not None:
            parts.append(f"(byte offset {self.byte_offset})")
        if self.position:
            parts.append(f"in {self.position}")
        return " ".join(parts)

    def at(self, position: str) -> DecodeError:
        """Attach the Kafka/archive position (e.g. 'topic t partition 0 offset 17') and return self."""
        self.position = position
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class UnsupportedError(ReplicatorError):
    """Input that is well-formed but that the replicator deliberately refuses (e.g. handle-key-only rows)."""


class ClaimCheckError(ReplicatorError):
    """A claim-check reference (TiCDC large-message handling) could not be resolved: no
    --claim-check-storage, or its file is missing, unreadable or not the referenced message. Stops
    the run (never dead-lettered, also with --on-error skip): the row exists and must not be lost."""


class DdlError(ReplicatorError):
    """A DDL event that cannot be mapped or applied (unknown code, unparsable query, unsupported change)."""

    commit_ts: int | None = None  # the failing DDL's commit ts, once the engine knows it (engine/loop.py)


class SchemaError(ReplicatorError):
    """A row event does not fit the target table (unknown table, unknown column, no handle key...)."""


class StateError(ReplicatorError):
    """The warehouse state is inconsistent or locked by another run."""


class KafkaSourceError(ReplicatorError):
    """The Kafka broker could not be reached or answered with an error past the retry budget."""


class FrameError(DecodeError):
    """A framed archive/binlog file is corrupt (bad CRC, impossible length)."""


class TruncatedFrameError(FrameError):
    """The file ends inside a frame: typically a writer killed mid-write."""


class StorageError(ReplicatorError):
    """The warehouse's store (a directory or an object store) refused or could not be reached."""


class CatalogError(ReplicatorError):
    """The metastore tables are registered in could not be reached or refused a registration; the
    warehouse is unchanged past the last committed step, so a rerun registers what is missing."""


class LeaseLostError(StateError):
    """This run's writer lease on the warehouse expired or was taken over: it must not commit."""

    exit_code = 3
