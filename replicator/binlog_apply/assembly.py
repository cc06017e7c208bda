"""Transaction assembly (pure): the event stream of a binlog -> committed transactions, in commit order."""

from __future__ import annotations

from replicator.binlog_apply.model import DEFAULT_DATABASE, Statement, Transaction
from replicator.binlog_apply.translate import parse_use
from replicator.errors import DecodeError
from replicator.formats.binlog import BinlogEvent, split_binlog_name


class TransactionAssembler:
    """Turns the event stream into committed transactions, in commit order.

    Query events are buffered per GTID until their Commit; Rollback discards the buffer. ``USE db``
    in a Query sets the default database of its (server_id, session_id) for statements logged after
    it (not transactional, as in MySQL). A Chain that skips a file number is a gap: it raises, so the
    transactions still open are never applied.
    """

    def __init__(self, default_database: str = DEFAULT_DATABASE) -> None:
        self.default_database = default_database
        self._open: dict[tuple[int, int], list[Statement]] = {}
        self._sessions: dict[tuple[int, int], str] = {}
        self.commits = 0
        self.rollbacks = 0

    @property
    def pending(self) -> list[tuple[int, int]]:
        """GTIDs with statements but no Commit/Rollback yet (never applied)."""
        return list(self._open)

    def feed(self, event: BinlogEvent) -> Transaction | None:
        """Consume one event; returns the transaction its Commit completes, if any."""
        msg = event.message
        if event.type == "Query":
            session = (msg.header.server_id, msg.session_id)
            use = parse_use(msg.query)
            if use is not None:
                self._sessions[session] = use
                return None
            self._open.setdefault(event.gtid, []).append(Statement(
                query=msg.query,
                variables=tuple((v.name, v.value) for v in msg.variable),
                database=self._sessions.get(session, self.default_database),
                session_id=msg.session_id,
                file=event.file,
                offset=event.offset,
            ))
        elif event.type == "Commit":
            self.commits += 1
            return Transaction(self.commits, event.gtid, tuple(self._open.pop(event.gtid, ())), event.file,
                               event.offset)
        elif event.type == "Rollback":
            self._open.pop(event.gtid, None)
            self.rollbacks += 1
        elif event.type == "Chain":
            _, seq = split_binlog_name(event.file)
            if msg.next != seq + 1:
                raise DecodeError(
                    f"gap in the log: the Chain names file number {msg.next} but the next file is number "
                    f"{seq + 1}; open transactions {sorted(self._open)} are not applied",
                    offset=event.offset, where=event.file,
                )
        return None
