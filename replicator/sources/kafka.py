"""Record sources: Kafka topics (kafka-python), read by the engine (`run`) and by `capture`.

A source hands out raw records in per-partition offset order; it knows nothing about TiCDC.
Partitions are (topic, partition) pairs: the engine may follow several topics at once (a list,
or every topic matching a pattern, found as they appear).
Both readers get the same outage probing, bounded broker calls and retry budget; only the
advice in their error messages differs (`SourceHints`).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from replicator.errors import ConfigError, KafkaSourceError
from replicator.events import TP, Record

log = logging.getLogger(__name__)


def kafka_lag(ends: Mapping[TP, int], positions: Mapping[TP, int | None]) -> int:
    """Records not read yet: per partition, its end offset less the next offset to read (none
    when past it; a partition without a position counts from offset 0)."""
    return sum(max(0, end - (positions.get(p) or 0)) for p, end in ends.items())


class Source(Protocol):
    name: str

    def partitions(self) -> list[TP]: ...

    def start(self, positions: Mapping[TP, int | None]) -> None:
        """Begin reading: partition -> next offset, or None for the earliest available."""

    def poll(self) -> list[Record]: ...

    def caught_up(self) -> bool:
        """True once every partition was read up to the end offsets seen at start."""

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Best-effort: publish progress (e.g. consumer-group offsets for lag tooling)."""

    def lag(self) -> int | None: ...

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        """Per partition: records not read yet, counted from `read_to` (the next offset the caller
        will process, where it knows) or the source's own position; None: it cannot tell."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class SourceHints:
    """What a stopped reader tells the user to do: rerun, and how to recover lost offsets."""

    safe: str = "progress is committed up to the last applied step"
    not_started: str = "nothing was applied"
    lost: str = "replay from an archive, or rebuild with `replicator replay --from-earliest` into a new warehouse"


CAPTURE_HINTS = SourceHints(
    safe="everything captured so far is archived",
    not_started="nothing was captured",
    lost="the archive has a gap there; capture into a new directory with --from-earliest",
)


@dataclass(frozen=True)
class KafkaSettings:
    """`topic`: the one topic, or `topics` several, or `topic_pattern` every topic whose whole
    name matches it (found as they appear); exactly one of them is given."""

    bootstrap_servers: str
    topic: str = ""
    group_id: str | None = "replicator"  # None: no consumer-group offsets are committed
    security: Mapping[str, Any] | None = None  # SASL/SSL kafka-python settings (never logged)
    poll_max_records: int = 5000
    retry_budget_s: float = 120.0  # a broker unreachable this long stops the run (non-zero, nothing lost)
    probe_after_s: float = 5.0  # polls empty this long: check that the broker still answers
    fetch_max_bytes: int = 64 * 1024 * 1024
    # Kafka's own default. Larger per-partition fetches let one partition run far ahead of the
    # others, so the global watermark (the slowest partition's) lags what is buffered: a full
    # buffer then applies a tiny step per resolved event (100k events: 407 steps of median 131
    # rows at 16 MiB vs 8 steps of ~15k rows at 1 MiB; `make bench`). Larger messages still come.
    max_partition_fetch_bytes: int = 1024 * 1024
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None

    @property
    def named_topics(self) -> tuple[str, ...]:
        """The topics given by name (none with a pattern)."""
        return self.topics or ((self.topic,) if self.topic else ())

    @property
    def single_topic(self) -> str | None:
        """The one topic when exactly one is followed by name (the Spark reader and capture need one)."""
        named = self.named_topics
        return named[0] if len(named) == 1 and self.topic_pattern is None else None

    @property
    def source_name(self) -> str:
        """What the warehouse records as its source: the topic, the topics (sorted, comma-separated)
        or `~REGEX`."""
        if self.topic_pattern is not None:
            return f"~{self.topic_pattern}"
        return ",".join(sorted(self.named_topics))

    def matches(self, topic: str) -> bool:
        """Whether this source follows `topic`."""
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None and not topic.startswith("__")
        return topic in self.named_topics


def topic_pattern(text: str) -> str:
    """A --topic-pattern, checked: a Python regular expression that must match a whole topic name."""
    try:
        re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--topic-pattern {text!r} is not a regular expression: {exc}") from None
    return text


class KafkaSource:
    """Reads one or more topics with `assign()` (no rebalancing: the warehouse state owns positions).

    Several topics: a list (`KafkaSettings.topics`) or a pattern (`topic_pattern`). Topics that
    appear later (TiCDC creates a table's topic when the table is created) are found by
    `fresh_partitions`, which the loop calls before every step, and read from their earliest offset.

    Broker outages: kafka-python's poll() does not raise when the broker goes away; it reconnects
    in the background (backoff up to `reconnect_backoff_max_ms`) and returns nothing meanwhile.
    So after `probe_after_s` of empty polls the source asks the broker for end offsets (bounded by
    a short timeout); while that fails the probes back off, and once the broker has been
    unreachable for `retry_budget_s` the run stops with KafkaSourceError. Progress up to the last
    applied step is durable, so nothing is lost and a rerun continues. Offsets no longer retained
    (`auto_offset_reset="none"`) stop the run instead of silently skipping to the earliest ones.
    Its broker clients: `consumer_factory(**config)`, `admin_factory(**config)` (kafka-python's by default).
    """

    PROBE_TIMEOUT_MS = 5000
    COMMIT_TIMEOUT_MS = 5000
    METADATA_RETRY_S = 1.0  # after a failed metadata request, the next one waits this long

    def __init__(self, settings: KafkaSettings, hints: SourceHints | None = None, *,
                 consumer_factory: Callable[..., Any] | None = None, admin_factory: Callable[..., Any] | None = None
                 ) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer
        from kafka.errors import KafkaError

        if bool(settings.named_topics) == (settings.topic_pattern is not None):
            raise ConfigError("give the topics to read: --topic (repeatable) or --topic-pattern, not both")
        self.settings, self.hints, self.name = settings, hints or SourceHints(), settings.source_name
        self._KafkaError = KafkaError
        self._admin_factory = admin_factory or KafkaAdminClient
        try:
            self._consumer = (consumer_factory or KafkaConsumer)(
                bootstrap_servers=settings.bootstrap_servers.split(","),
                group_id=settings.group_id,
                enable_auto_commit=False,
                auto_offset_reset="none",  # every partition is seek()ed; out of range = data lost: stop
                max_poll_records=settings.poll_max_records,
                fetch_max_bytes=settings.fetch_max_bytes,
                max_partition_fetch_bytes=settings.max_partition_fetch_bytes,
                request_timeout_ms=30000,
                bootstrap_timeout_ms=int(min(30.0, settings.retry_budget_s) * 1000),  # start-up: the budget too
                reconnect_backoff_max_ms=5000,
                **dict(settings.security or {}),
            )
        except KafkaError as exc:
            raise KafkaSourceError(
                f"cannot connect to Kafka at {settings.bootstrap_servers}: {exc}; check --bootstrap-servers"
                + (" and the security settings (--security-protocol, --sasl-mechanism, --sasl-username, the "
                   "password in REPLICATOR_SASL_PASSWORD or the config file, --ssl-cafile): a rejected login "
                   "looks the same" if settings.security else "")
            ) from None
        self._tps: list[Any] = []
        self._begin: dict[TP, int] = {}  # earliest retained offsets seen at start
        self._end: dict[TP, int] = {}  # end offsets seen at start (the --until-caught-up target)
        self._latest_end: dict[TP, int] = {}  # refreshed by probes (lag)
        self._last_ok = time.monotonic()  # records or a successful probe
        self._down_since: float | None = None
        self._probe_delay = settings.probe_after_s
        self._admin: Any = None  # KafkaAdminClient for fresh metadata, made on first use
        self._meta_down_since: float | None = None  # first failed metadata request of an outage
        self._meta_failed_at = 0.0
        self.outages = 0  # times the broker became unreachable during this run
        self._pausing = False  # a partition was paused this run (`_unpark`)
        self._max_records = settings.poll_max_records  # a poll's records (`limit_poll`)

    def _where(self) -> str:
        return f"Kafka at {self.settings.bootstrap_servers}"

    def _what(self) -> str:
        s = self.settings
        if s.topic_pattern is not None:
            return f"the topics matching {s.topic_pattern!r}"
        named = s.named_topics
        return f"topic {named[0]!r}" if len(named) == 1 else f"topics {', '.join(named)}"

    @staticmethod
    def _tp(p: TP) -> Any:
        from kafka import TopicPartition

        return TopicPartition(p.topic, p.partition)

    def _topic_partitions(self, topic: str) -> list[TP]:
        try:
            parts = self._consumer.partitions_for_topic(topic)
        except self._KafkaError as exc:
            raise KafkaSourceError(f"{self._where()}: cannot read the metadata of topic {topic!r}: {exc}") from None
        return [TP(topic, p) for p in sorted(parts or ())]

    def _listed_topics(self) -> list[str]:
        """The topics this source follows that exist now (the consumer's metadata)."""
        s = self.settings
        if s.topic_pattern is None and len(s.named_topics) == 1:
            return list(s.named_topics)
        try:
            existing = self._consumer.topics()
        except self._KafkaError as exc:
            raise KafkaSourceError(f"{self._where()}: cannot list topics: {exc}") from None
        return sorted(t for t in existing if s.matches(t))

    def partitions(self) -> list[TP]:
        """Every partition of the followed topics that exist (waits up to 30 s for one to exist)."""
        deadline = time.monotonic() + 30
        while True:
            found = [tp for t in self._listed_topics() for tp in self._topic_partitions(t)]
            if found:
                missing = sorted(set(self.settings.named_topics) - {tp.topic for tp in found})
                if missing:
                    log.warning("topic(s) %s not found on %s: read from their start once they appear",
                                ", ".join(missing), self.settings.bootstrap_servers)
                return found
            if time.monotonic() > deadline:
                raise KafkaSourceError(f"{self._what()} not found on {self.settings.bootstrap_servers}")
            time.sleep(0.5)

    def start(self, positions: Mapping[TP, int | None]) -> None:
        try:
            self._start(positions)
        except self._KafkaError as exc:
            raise KafkaSourceError(
                f"{self._where()}: cannot read the offsets of {self._what()}: {exc}; "
                f"{self.hints.not_started}, rerun when the broker is back"
            ) from None
        self._latest_end = dict(self._end)
        self._last_ok = time.monotonic()

    def _start(self, positions: Mapping[TP, int | None]) -> None:
        self._tps = [self._tp(p) for p in sorted(positions)]
        self._consumer.assign(self._tps)
        begin = self._consumer.beginning_offsets(self._tps)
        self._begin = {TP(tp.topic, tp.partition): int(off) for tp, off in begin.items()}
        for tp in self._tps:
            pos = positions[TP(tp.topic, tp.partition)]
            if pos is None:
                self._consumer.seek(tp, begin[tp])
            else:
                if pos < begin[tp]:
                    raise KafkaSourceError(
                        f"topic {tp.topic!r} partition {tp.partition}: the warehouse needs offset {pos} but the "
                        f"earliest retained offset is {begin[tp]} (data lost to retention); {self.hints.lost}"
                    )
                self._consumer.seek(tp, pos)
        self._end = {TP(tp.topic, tp.partition): off for tp, off in self._consumer.end_offsets(self._tps).items()}

    def earliest_offsets(self, partitions: Sequence[TP]) -> dict[TP, int]:
        """The earliest retained offset per partition (bounded: KafkaSourceError when unanswered)."""
        try:
            begin = self._consumer.beginning_offsets([self._tp(p) for p in partitions],
                                                     timeout_ms=self.PROBE_TIMEOUT_MS)
        except self._KafkaError as exc:
            raise KafkaSourceError(
                f"{self._where()}: cannot read the offsets of {self._what()}: {exc}; "
                f"{self.hints.not_started}, rerun when the broker is back"
            ) from None
        return {TP(tp.topic, tp.partition): int(off) for tp, off in begin.items()}

    def committed_offsets(self, partitions: Sequence[TP]) -> dict[TP, int]:
        """The consumer group's committed offsets, where it has any (best effort: {} without a group)."""
        out: dict[TP, int] = {}
        if self.settings.group_id is None:
            return out
        for p in partitions:
            try:
                off = self._consumer.committed(self._tp(p), timeout_ms=self.PROBE_TIMEOUT_MS)
            except Exception as exc:  # no group coordinator etc.: the group is only one of the start options
                log.debug("committed offset of %s unavailable: %s", p, exc)
                continue
            if off is not None and off >= 0:
                out[p] = int(off)
        return out

    def begin_offsets_at_start(self) -> dict[TP, int]:
        """Per partition, the earliest retained offset seen when reading started."""
        return dict(self._begin)

    def end_offsets_at_start(self) -> dict[TP, int]:
        """Per partition, the end offset seen when reading started (the --until-caught-up target)."""
        return dict(self._end)

    def offsets_for_timestamp(self, when: dt.datetime) -> dict[TP, int | None]:
        parts = self.partitions()
        ms = int(when.timestamp() * 1000)
        found = self._consumer.offsets_for_times({self._tp(p): ms for p in parts})
        out: dict[TP, int | None] = {}
        end = self._consumer.end_offsets([self._tp(p) for p in parts])
        for p in parts:
            ot = found.get(self._tp(p))
            out[p] = ot.offset if ot is not None else end[self._tp(p)]
        return out

    def poll(self) -> list[Record]:
        """Records in offset order per partition; [] while none arrive or the broker is away.

        Raises KafkaSourceError past the retry budget, or when an offset is no longer retained.
        """
        from kafka.errors import OffsetOutOfRangeError

        if self._pausing:
            self._unpark()
        try:
            batches = self._consumer.poll(timeout_ms=500, max_records=self._max_records)
        except OffsetOutOfRangeError as exc:
            raise KafkaSourceError(
                f"{self._what()}: offsets {exc} are no longer retained (deleted by retention while "
                f"the replicator was reading): data is lost; {self.hints.lost}"
            ) from None
        except self._KafkaError as exc:
            self._unreachable(exc)
            time.sleep(min(self._probe_delay, 10.0))
            return []
        out: list[Record] = []
        for tp, records in batches.items():
            for r in records:
                out.append(Record(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value))
        if out:
            self._reachable()
        elif time.monotonic() - self._last_ok >= self._probe_delay:
            self._probe()
        return out

    def _probe(self) -> None:
        """Ask the broker for end offsets: proves it answers (poll() alone cannot tell)."""
        try:
            ends = self._consumer.end_offsets(self._tps, timeout_ms=self.PROBE_TIMEOUT_MS)
        except self._KafkaError as exc:
            self._unreachable(exc)
            return
        self._latest_end = {TP(tp.topic, tp.partition): off for tp, off in ends.items()}
        self._reachable()

    def _reachable(self) -> None:
        if self._down_since is not None:
            log.warning("%s answers again after %.0fs", self._where(), time.monotonic() - self._down_since)
        self._down_since = None
        self._last_ok = time.monotonic()
        self._probe_delay = self.settings.probe_after_s

    def _unreachable(self, exc: Exception, backoff: bool = True) -> None:
        """Count an outage against the retry budget; `backoff` (a poll or probe, not a position
        lookup) also doubles the delay to the next probe."""
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = self._last_ok
            self.outages += 1
        down = now - self._down_since
        self._check_budget(f"{self._where()} unreachable", down, exc)
        if not backoff:
            log.info("%s unreachable for %.0fs (%s) asking a position", self._where(), down, exc)
            return
        log.warning("%s unreachable for %.0fs (%s); retrying, budget %.0fs", self._where(), down, exc,
                    self.settings.retry_budget_s)
        self._last_ok = now  # next probe after the (doubled) delay
        self._probe_delay = min(self._probe_delay * 2, 30.0)

    def _check_budget(self, what: str, down: float, exc: Exception) -> None:
        if down > self.settings.retry_budget_s:
            raise KafkaSourceError(
                f"{what} for {down:.0f}s (retry budget {self.settings.retry_budget_s:.0f}s): {type(exc).__name__}: "
                f"{exc}; nothing was lost: {self.hints.safe}, rerun when the broker is back"
            ) from None

    def _position(self, tp: Any) -> int | None:
        """The next offset to read, None when unknown; bounded. After a broker restart kafka-python
        validates it over the network (KIP-320) and may raise: an outage like a failed poll."""
        try:
            pos = self._consumer.position(tp, timeout_ms=self.PROBE_TIMEOUT_MS)
        except self._KafkaError as exc:
            self._unreachable(exc, backoff=False)
            return None
        return None if pos is None else int(pos)

    def backlogged(self) -> bool:
        """Whether some partition is behind the high watermark its last fetch response carried
        (kafka-python keeps it; no request is sent): records already on the broker are unread."""
        for tp in self._tps:
            high = self._consumer.highwater(tp)
            if high is None:
                continue
            pos = self._position(tp)
            if pos is not None and pos < high:
                return True
        return False

    def pause_only(self, partitions: Collection[TP]) -> None:
        """Fetch nothing from `partitions` until told otherwise, and read every other one (the
        loop's backpressure, engine/loop.py). kafka-python keeps what it already fetched for a
        paused partition and hands it out after the resume, so pausing often costs no re-fetch."""
        assigned = set(self._tps)
        want = {tp for tp in (self._tp(p) for p in partitions) if tp in assigned}
        paused = self._consumer.paused()
        if want - paused:
            self._consumer.pause(*(want - paused))
            self._pausing = True
        if paused - want:
            self._consumer.resume(*(paused - want))

    def limit_poll(self, records: int) -> None:
        """At most `records` records a poll (and never more than `poll_max_records`): the loop's
        backpressure keeps one poll within a share of its buffer (engine/loop.py)."""
        self._max_records = max(1, min(records, self.settings.poll_max_records))

    def _unpark(self) -> None:
        """Work around kafka-python 3.0.12: records it had parsed for a partition that was then
        paused are parked, and handed back after the resume only while no other partition's
        record set is in line; but a drained record set stays in line (falsy, never None), and a
        partition with parked records is never fetched again. A resumed partition would thus
        wait forever (seen: a catch-up stuck with a full buffer). Clearing the drained set, which
        holds nothing, lets the fetcher restore what it parked."""
        fetcher = getattr(self._consumer, "_fetcher", None)
        in_line = getattr(fetcher, "_next_partition_records", None)
        if fetcher is not None and in_line is not None and not in_line:
            fetcher._next_partition_records = None

    def caught_up(self) -> bool:
        for tp in self._tps:
            pos = self._position(tp)
            if pos is None or pos < self._end.get(TP(tp.topic, tp.partition), 0):
                return False
        return True

    def fresh_partitions(self) -> list[TP] | None:
        """The followed topics' partitions from metadata requested now (the consumer's own metadata
        may be minutes old): new topics of a pattern or list, new partitions of known ones. None
        when the broker does not answer within PROBE_TIMEOUT_MS, or when the last request failed
        less than METADATA_RETRY_S ago (callers ask per record while blocked).

        A failed admin client is dropped: kafka-python fails its requests at once while its only
        node is in reconnect backoff (up to 30 s), so a fresh client answers sooner once the broker
        is back. Raises KafkaSourceError when no answer came for the retry budget.
        """
        now = time.monotonic()
        if self._meta_down_since is not None and now - self._meta_failed_at < self.METADATA_RETRY_S:
            return None
        s = self.settings
        try:
            if self._admin is None:
                self._admin = self._admin_factory(
                    bootstrap_servers=s.bootstrap_servers.split(","), client_id="replicator-metadata",
                    request_timeout_ms=self.PROBE_TIMEOUT_MS, bootstrap_timeout_ms=self.PROBE_TIMEOUT_MS,
                    reconnect_backoff_max_ms=self.METADATA_RETRY_S * 1000, **dict(s.security or {}))
            if s.single_topic is not None:
                wanted = [s.single_topic]  # one request, as before several topics were followed
            else:
                wanted = sorted(t for t in self._admin.list_topics() if s.matches(t))
            topics = self._admin.describe_topics(wanted) if wanted else []
        except self._KafkaError as exc:
            self._drop_admin()
            now = time.monotonic()
            self._meta_failed_at = now
            if self._meta_down_since is None:
                self._meta_down_since = now
                log.warning("%s: cannot fetch the partitions of %s: %s; applying waits until the broker answers "
                            "(retrying every %.0fs, budget %.0fs)", self._where(), self._what(), exc,
                            self.METADATA_RETRY_S, s.retry_budget_s)
            else:
                self._check_budget(f"{self._where()}: no answer to metadata requests for {self._what()}",
                                   now - self._meta_down_since, exc)
            return None
        if self._meta_down_since is not None:
            log.warning("%s: metadata requests answered again after %.0fs", self._where(), now - self._meta_down_since)
            self._meta_down_since = None
        found = [TP(t["name"], int(p.get("partition_index", p.get("partition"))))
                 for t in topics if t.get("name") in wanted and not t.get("error_code")
                 for p in t.get("partitions") or () if p.get("partition_index", p.get("partition")) is not None]
        return sorted(found) or None

    def _drop_admin(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception as exc:  # closing a client of an absent broker; nothing to keep
                log.debug("closing the metadata client: %s", exc)
            self._admin = None

    def add_partitions(self, new: Sequence[TP]) -> bool:
        """Read partitions found mid-run (of a new topic, or added to a known one) from their
        earliest offset, up to their end offset of now in --until-caught-up mode. False when the
        broker does not answer."""
        added = [self._tp(p) for p in new]
        try:
            begin = self._consumer.beginning_offsets(added, timeout_ms=self.PROBE_TIMEOUT_MS)
            end = self._consumer.end_offsets(added, timeout_ms=self.PROBE_TIMEOUT_MS)
        except self._KafkaError as exc:
            log.warning("%s: cannot read the offsets of new partitions %s: %s", self._where(),
                        ", ".join(map(str, new)), exc)
            return False
        self._tps = sorted([*self._tps, *added], key=lambda tp: (tp.topic, tp.partition))
        self._consumer.assign(self._tps)  # keeps the positions of the partitions already assigned
        for tp in added:
            self._consumer.seek(tp, begin[tp])
            self._end[TP(tp.topic, tp.partition)] = end[tp]
            self._latest_end[TP(tp.topic, tp.partition)] = end[tp]
        return True

    def read_to_end(self, topics: Sequence[str], read_to: Mapping[TP, int]) -> bool | None:
        """Whether every partition of `topics` was read (`read_to`: next offset per partition) up to
        its end offset of now (one request); None when the broker does not answer."""
        tps = [tp for tp in self._tps if tp.topic in set(topics)]
        if not tps:
            return True
        try:
            ends = self._consumer.end_offsets(tps, timeout_ms=self.PROBE_TIMEOUT_MS)
        except self._KafkaError as exc:
            log.warning("%s: cannot read the end offsets of %s: %s", self._where(), ", ".join(topics), exc)
            return None
        return all(read_to.get(TP(tp.topic, tp.partition), 0) >= off for tp, off in ends.items())

    def lag(self, read_to: Mapping[TP, int] | None = None) -> int | None:
        """Records on the broker not read yet: the sum of `partition_lags`."""
        lags = self.partition_lags(read_to)
        return None if lags is None else sum(lags.values())

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        """Per partition: its end offset (the later of the last probe's and the last fetch response's
        high watermark; no request is sent) less the next offset to read. `read_to`: the next offset
        to read per partition when records are read elsewhere (the Spark reader's executors; this
        consumer then stays where `start` put it) or the caller knows better (records fetched but
        not decoded yet); partitions it lacks count from this consumer's position. Only from the
        thread that polls: kafka-python's consumer is not thread-safe."""
        try:
            keys = {TP(tp.topic, tp.partition): tp for tp in self._tps}
            positions = {p: read_to[p] if read_to and p in read_to else self._position(tp) for p, tp in keys.items()}
            ends = {p: max(self._latest_end.get(p, 0), self._consumer.highwater(tp) or 0) for p, tp in keys.items()}
            return {p: kafka_lag({p: end}, positions) for p, end in ends.items()}
        except Exception:  # informational only
            return None

    def commit(self, offsets: Mapping[TP, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        if self.settings.group_id is None or not offsets:
            return
        if self._down_since is not None:
            return  # informational only; the next commit after the outage carries these offsets too
        try:
            self._consumer.commit({self._tp(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                                  timeout_ms=self.COMMIT_TIMEOUT_MS)
        except self._KafkaError as exc:  # informational: the warehouse holds the real progress
            log.warning("could not commit consumer-group offsets: %s", exc)

    def close(self) -> None:
        try:  # a broker away at the end must not hide how the run ended
            self._consumer.close(timeout_ms=self.COMMIT_TIMEOUT_MS)
        except self._KafkaError as exc:
            log.debug("closing the consumer: %s", exc)
        self._drop_admin()


def parse_offsets(text: str, topics: Sequence[str], partitions: Sequence[TP] | None = None) -> dict[TP, int]:
    """`[TOPIC:]P=O[,...]` -> {(topic, partition): offset}; bare `P=O` needs one named topic."""
    out: dict[TP, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            where, o = part.rsplit("=", 1)
            topic, sep, p = where.strip().rpartition(":")
            if not sep:
                if len(topics) != 1:
                    raise ConfigError(f"--from-offsets {part.strip()!r}: with several topics, name the topic "
                                      "(TOPIC:PARTITION=OFFSET)")
                topic = topics[0]
            out[TP(topic, int(p))] = int(o)
        except ValueError:
            raise ConfigError(f"--from-offsets expects [TOPIC:]P=O[,...], got {text!r}") from None
    if partitions is not None:
        unknown = sorted(set(out) - set(partitions))
        if unknown:
            raise ConfigError(f"--from-offsets names partitions {', '.join(map(str, unknown))} that the "
                              "followed topics do not have")
    return out
