"""The storage-sink source without Spark: simulated changefeeds (CSV and canal-json: DDL versions,
a table older than the changefeed, a restart's versions, a table split between two writers) read
through the windower into an in-memory warehouse and compared with the simulator's expected
tables; kills at random instants resumed from the last saved progress; a follower that sees the
files appear in the order the sink wrote them; nothing read past an index file; the refusal of a
changefeed without commit ts; a bad line named by file and line."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from replicator.codec.csv.common import CsvConfig
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.loop import ControlLoop, LoopOptions
from replicator.engine.window import Windower
from replicator.errors import ConfigError, DecodeError
from replicator.events import TP, Record, RowChange
from replicator.progress import Progress
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables
from replicator.sim.storage_sink import StorageLayout, write_storage_sink
from replicator.sim.stream import Simulation
from replicator.sources.storage_sink import StorageSinkSettings, StorageSinkSource
from replicator.storage.fileio import FileIO
from replicator.storage.local import LocalFileIO
from tests.unit.test_simulate import MemoryWarehouse


def _sim(seed: int = 5, events: int = 300) -> Simulation:
    return Simulation(SimConfig(protocol="open", events=events, seed=seed, tables=4, ddl="all"))


class Replica:
    """The engine's loop in miniature: records -> windower -> steps -> memory warehouse, with the
    progress and the warehouse saved together after every apply (what a kill leaves)."""

    def __init__(self, root: Path | str, protocol: str, io: FileIO | None = None, *, forget: bool = True,
                 **settings: Any) -> None:
        self.settings = StorageSinkSettings(str(root), protocol=protocol, poll_interval_s=0,  # type: ignore[arg-type]
                                            **settings)
        self.io = io
        self.saved = (Progress(), MemoryWarehouse())
        self.records = 0
        self.forget = forget
        self.retired: set[str] = set()  # stream topics retired from the window, over every run

    def run(self, *, kill_after: int | None = None, follow: bool = False) -> bool:
        """Read until caught up (or until killed after that many records: False)."""
        progress, wh = copy.deepcopy(self.saved)
        source = StorageSinkSource(self.settings, self.io)
        if self.forget:  # as the engine wires it (engine/pipeline.py)
            source.applied_ts = lambda: progress.applied_ts
            source.ended_versions = progress.ended_versions
        self.source = source
        parts = source.partitions()
        windower = Windower(parts, progress, scope_of=ddl_scope)
        source.start({p: progress.cursors[p].offset if p in progress.cursors else None for p in parts})
        known, n = set(parts), 0
        loop = ControlLoop(source, source.decode, None, windower, LoopOptions())  # type: ignore[arg-type]
        while True:
            for rec in source.poll():
                for gone in source.ended:  # streams read and applied to their end: out of the window
                    windower.retire(gone)
                    known.discard(gone)
                    self.retired.add(gone.topic)
                source.ended.clear()
                tp = TP(rec.topic, rec.partition)
                if tp not in known:
                    windower.add_partition(tp)
                    known.add(tp)
                windower.offer(tp, rec.offset, source.decode(rec))
                n += 1
                self.records += 1
                if kill_after is not None and n >= kill_after:
                    return False
                if n % 23 == 0:
                    self._apply(loop, wh)
            if source.caught_up() and self._apply(loop, wh):
                return True

    def _apply(self, loop: ControlLoop, wh: MemoryWarehouse) -> bool:
        """Apply what is ready, once the loop's check of the streams found and of the quiet ones
        passes (as the engine's loop does): False when it does not."""
        windower = loop.windower
        if windower.has_ready_step() and not loop.partitions_known():
            return False
        while (step := windower.next_step()) is not None:
            wh.apply(step)
            windower.commit(step)
        windower.checkpoint()
        self.saved = copy.deepcopy((windower.progress, wh))
        return True


OTHER_CSV = CsvConfig(delimiter="|~", quote="'", terminator="\n", null="NULL", output_old_value=True,
                      binary_encoding="hex")


@pytest.mark.parametrize(("protocol", "csv"), [("csv", CsvConfig()), ("canal-json", CsvConfig()), ("csv", OTHER_CSV)])
def test_simulated_storage_sink_replicates_exactly(tmp_path: Path, protocol: str, csv: CsvConfig) -> None:
    sim = _sim()
    write_storage_sink(sim, str(tmp_path), StorageLayout(protocol=protocol, csv=csv))  # type: ignore[arg-type]
    names = {p.name for p in tmp_path.rglob("*")}
    assert any(n.startswith("CDC_") for n in names) and any(n.startswith("CDC_") and n.endswith(".index")
                                                            for n in names)  # a table split in two writers
    replica = Replica(tmp_path, protocol, csv=csv)
    assert replica.run()
    progress, wh = replica.saved
    assert progress.applied_ts == sim.expected.watermark
    assert compare_tables(sim.expected, wh.tables()) == []


class Recording(LocalFileIO):
    def __init__(self) -> None:
        self.writes: list[tuple[str, bytes]] = []

    def write(self, path: str, data: bytes) -> None:
        self.writes.append((path, data))


def _follow(tmp_path: Path, seed: int, rnd: random.Random | None = None) -> tuple[Simulation, Replica, int]:
    """The sink's writes replayed in order into a live directory, the replica run after each
    metadata write (with `rnd`: killed at a random instant, up to twice, then run to the end)."""
    sim, rec = _sim(seed=seed), Recording()
    staging, live = tmp_path / "staging", tmp_path / "live"
    write_storage_sink(sim, str(staging), io=rec)
    replica, io, kills = Replica(live, "csv"), LocalFileIO(), 0
    for path, data in rec.writes:
        io.write(str(live / Path(path).relative_to(staging)), data)
        if path.endswith("/metadata"):
            for _ in range(2):
                if rnd is not None and not replica.run(kill_after=rnd.randint(1, 150)):
                    kills += 1
            assert replica.run()
    return sim, replica, kills


def test_a_follower_sees_the_files_appear_in_write_order(tmp_path: Path) -> None:
    """A pass after each metadata write: every checkpoint's rows are applied, and new table
    versions and writers join as they appear."""
    sim, replica, _ = _follow(tmp_path, seed=4)
    assert compare_tables(sim.expected, replica.saved[1].tables()) == []
    assert replica.saved[0].applied_ts == sim.expected.watermark


def test_kills_at_random_instants_resume_exactly(tmp_path: Path) -> None:
    sim, replica, kills = _follow(tmp_path, seed=11, rnd=random.Random(7))
    assert kills >= 3
    assert compare_tables(sim.expected, replica.saved[1].tables()) == []
    assert replica.saved[0].applied_ts == sim.expected.watermark


def test_kills_inside_one_pass_over_a_backlog_resume_exactly(tmp_path: Path) -> None:
    """The whole changefeed written before the first run: its one pass applies in steps at the
    streams' intermediate resolved events; kills between them resume from the saved cursors."""
    sim = _sim(seed=12, events=600)
    write_storage_sink(sim, str(tmp_path))
    kill_inside_one_pass(Replica(tmp_path, "csv"), sim, random.Random(3), most=400, kills=8)


def kill_inside_one_pass(replica: Replica, sim: Simulation, rnd: random.Random, *, most: int, kills: int) -> None:
    """Kill `replica` after a random number of records (at most `most`) until it finishes or has
    been killed `kills` times, then let it finish: steps saved between kills, the tables exact."""
    done, applied = 0, set()
    while not replica.run(kill_after=rnd.randint(20, most)) and done < kills:
        done += 1
        applied.add(replica.saved[0].applied_ts)
    assert replica.run()
    assert done >= 3 and len(applied - {0}) >= 2  # steps were saved inside the pass, between kills
    assert compare_tables(sim.expected, replica.saved[1].tables()) == []
    assert replica.saved[0].applied_ts == sim.expected.watermark


def _first_csv(root: Path) -> Path:
    return min(p for p in root.rglob("CDC*.csv") if not p.name.startswith("CDC_"))


def test_nothing_is_read_past_the_index_and_a_named_file_not_yet_written_waits(tmp_path: Path) -> None:
    write_storage_sink(_sim(events=60), str(tmp_path))
    data = _first_csv(tmp_path)
    index = data.parent / "meta" / "CDC.index"
    last = index.read_text().strip()
    n = int(last[3:-4])
    extra = data.parent / f"CDC{n + 1:020d}.csv"
    extra.write_bytes(data.read_bytes().replace(b'"I"', b'"X"'))  # not named by the index: never read
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path)))
    source.start({p: None for p in source.partitions()})
    for r in source.poll():
        source.decode(r)  # the "X" records would fail here
    named = data.parent / f"CDC{n + 2:020d}.csv"
    index.write_text(named.name + "\n")  # names a file that is not written yet (and skips n + 1)
    source2 = StorageSinkSource(StorageSinkSettings(str(tmp_path)))
    source2.start({p: None for p in source2.partitions()})
    topics = {r.topic for r in source2.poll()}
    assert any(t.startswith(data.parent.parent.relative_to(tmp_path).as_posix()) for t in topics)


def test_an_empty_file_the_index_names_last_is_read_once_written(tmp_path: Path) -> None:
    """TiCDC's next writer of a directory writes the number its index names again when that file
    is missing or empty: the source waits for it rather than pass over it."""
    from replicator.codec.storage_sink.schema import SchemaFile, TableColumn, render_schema_file, schema_file_name

    cols = (TableColumn("id", "INT", "11", nullable=False, is_pk=True),)
    sf = SchemaFile("db", "t", 100, "CREATE TABLE `db`.`t` (`id` INT NOT NULL, PRIMARY KEY (`id`))", 3, cols)
    (tmp_path / "db" / "t" / "meta").mkdir(parents=True)
    (tmp_path / "db" / "t" / "meta" / schema_file_name(sf)).write_bytes(render_schema_file(sf))
    ddir = tmp_path / "db" / "t" / "100"
    (ddir / "meta").mkdir(parents=True)
    (ddir / "CDC000001.csv").write_text('"I","t","db",101,1\r\n')
    (ddir / "CDC000002.csv").write_text("")
    (ddir / "meta" / "CDC.index").write_text("CDC000002.csv\n")
    (tmp_path / "metadata").write_text('{"checkpoint-ts": 101}')
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path), date_separator="none", poll_interval_s=0))
    source.start({p: None for p in source.partitions()})

    def rows() -> list[int]:
        return [e.commit_ts for r in source.poll() for e in source.decode(r) if isinstance(e, RowChange)]

    assert rows() == [101]
    (ddir / "CDC000002.csv").write_text('"I","t","db",102,2\r\n')
    (tmp_path / "metadata").write_text('{"checkpoint-ts": 102}')
    assert rows() == [102]


def test_a_changefeed_without_commit_ts_is_refused_at_start(tmp_path: Path) -> None:
    write_storage_sink(_sim(events=40), str(tmp_path), StorageLayout(csv=CsvConfig(include_commit_ts=False)))
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path)))
    parts = source.partitions()
    with pytest.raises(ConfigError, match="include-commit-ts = true"):
        source.start({p: None for p in parts})


def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    write_storage_sink(_sim(events=40), str(tmp_path))
    data = _first_csv(tmp_path)
    lines = data.read_bytes().split(b"\r\n")
    lines[1] = b'"I","x","y",1,2'
    data.write_bytes(b"\r\n".join(lines))
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path)))
    source.start({p: None for p in source.partitions()})
    errors = []
    for r in source.poll():
        try:
            source.decode(r)
        except DecodeError as exc:
            errors.append((r, str(exc)))
    assert len(errors) == 1
    rec, message = errors[0]
    assert f"{data} line 2" in message and isinstance(rec, Record)


def test_status_shows_the_checkpoint_read_and_the_lag(tmp_path: Path) -> None:
    from replicator.views.status import Status, storage_sink_view

    (tmp_path / "metadata").write_text(json.dumps({"checkpoint-ts": (1_000_000 << 18) | 5}))
    assert storage_sink_view("topic-a") is None
    view = storage_sink_view(f"storage:{tmp_path}")
    assert view is not None and view["checkpoint_ts"] == (1_000_000 << 18) | 5
    st = Status("wh", 400_000 << 18, None, None, None, None, {}, storage_sink=view)
    assert st.to_json()["storage_sink"]["lag_s"] == 600.0
    missing = storage_sink_view(f"storage:{tmp_path / 'nowhere'}")
    assert missing is not None and missing["checkpoint_ts"] is None


def test_cli_simulates_and_refuses_what_cannot_be_replicated(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from replicator.cli import main

    sink, expected = tmp_path / "sink", tmp_path / "expected.json"
    assert main(["simulate", "--protocol", "canal-json", "--storage-sink", str(sink), "--events", "60",
                 "--expected", str(expected)]) == 0
    assert (sink / "metadata").exists() and expected.exists() and any(sink.rglob("CDC*.json"))
    assert main(["run", "--storage-sink", str(sink), "--protocol", "open", "--warehouse", str(tmp_path / "wh")]) == 2
    assert "--storage-sink needs --protocol csv or canal-json" in capsys.readouterr().err
    assert main(["replay", "--storage-sink", str(sink), "--protocol", "canal-json", "--warehouse",
                 str(tmp_path / "wh"), "--from-offsets", "0=1"]) == 2
    bare = tmp_path / "bare"
    write_storage_sink(_sim(events=40), str(bare), StorageLayout(csv=CsvConfig(include_commit_ts=False)))
    capsys.readouterr()
    assert main(["run", "--storage-sink", str(bare), "--protocol", "csv", "--warehouse", str(tmp_path / "wh2"),
                 "--until-caught-up"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "include-commit-ts = true" in err[0]


def test_partition_and_date_separators(tmp_path: Path) -> None:
    """Hand-written files in the documented shapes: a partition directory (enable-partition-separator)
    with month dates, numbers restarting per date, and a table version without date directories."""
    from replicator.codec.storage_sink.schema import SchemaFile, TableColumn, render_schema_file, schema_file_name

    cols = (TableColumn("id", "INT", "11", nullable=False, is_pk=True), TableColumn("v", "VARCHAR", "8"))
    first = SchemaFile("db", "t", 100, "CREATE TABLE `db`.`t` (`id` INT NOT NULL, `v` VARCHAR(8), PRIMARY KEY (`id`))",
                       3, cols)
    meta = tmp_path / "db" / "t" / "meta"
    meta.mkdir(parents=True)
    (meta / schema_file_name(first)).write_bytes(render_schema_file(first))
    files = {"db/t/100/55/2022-01/CDC000001.csv": [(1, 101, "a"), (2, 102, "b")],
             "db/t/100/55/2022-01/CDC000002.csv": [(3, 103, "c")],
             "db/t/100/55/2022-02/CDC000001.csv": [(4, 104, "d")],
             "db/t/100/66/2022-02/CDC000001.csv": [(5, 105, "e")]}
    for name, rows in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f'"I","t","db",{ts},{k},"{v}"\r\n' for k, ts, v in rows))
        index = path.parent / "meta" / "CDC.index"
        index.parent.mkdir(exist_ok=True)
        index.write_text(max(p.name for p in path.parent.glob("CDC*.csv")) + "\n")
    (tmp_path / "metadata").write_text('{"checkpoint-ts": 104}')
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path), date_separator="month", partition_separator=True))
    source.start({p: None for p in source.partitions()})
    events = [e for r in source.poll() for e in source.decode(r)]
    got = sorted((e.commit_ts, e.columns[0].value) for e in events if isinstance(e, RowChange))
    assert got == [(101, 1), (102, 2), (103, 3), (104, 4), (105, 5)]
    assert sorted(d.key.topic for d in source.listing.data.values()) == ["db/t/100/55", "db/t/100/66"]


def test_a_file_that_cannot_be_split_is_dead_lettered_from_where_it_breaks(tmp_path: Path) -> None:
    write_storage_sink(_sim(events=40), str(tmp_path))
    data = _first_csv(tmp_path)
    keep = [x for x in data.read_bytes().split(b"\r\n") if x][:-1]
    data.write_bytes(b"".join(x + b"\r\n" for x in keep) + b'"I","unclosed\r\n')
    good = len(keep) + 1
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path)))
    source.start({p: None for p in source.partitions()})
    mine = [r for r in source.poll() if r.key != b"resolved" and data.parent.parent.name in r.topic]
    errors = []
    for r in mine:
        try:
            source.decode(r)
        except DecodeError as exc:
            errors.append(str(exc))
    assert len(errors) == 1 and f"{data} line {good}" in errors[0] and "not closed" in errors[0]


class Counting(LocalFileIO):
    """The store calls a source makes: listings and reads, by path."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.reads: list[str] = []

    def children(self, path: str) -> list[str]:
        self.listed.append(path)
        return super().children(path)

    def read(self, path: str) -> bytes | None:
        self.reads.append(path)
        return super().read(path)

    def clear(self) -> None:
        self.listed.clear()
        self.reads.clear()


def test_store_calls_grow_with_what_changed_not_with_history(tmp_path: Path) -> None:
    """A pass whose checkpoint did not move reads `metadata` and nothing else; one whose checkpoint
    moved with nothing new lists no finished table version, each live version directory once,
    only its newest date directory's `meta/`, and reads only index files (no data file)."""
    write_storage_sink(_sim(events=300), str(tmp_path))
    io = Counting()
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path), poll_interval_s=0), io)
    source.start({p: None for p in source.partitions()})
    while not source.caught_up():
        source.poll()
    done = {str(tmp_path / k.directory) for k in source.listing.done}
    assert len(done) >= 3
    for _ in range(3):
        io.clear()
        assert source.poll() == []  # an idle pass: nothing new, the checkpoint did not move
        assert io.listed == [] and io.reads == [str(tmp_path / "metadata")]
    cp = json.loads((tmp_path / "metadata").read_text())["checkpoint-ts"]
    calls = []
    for step in (1, 2):
        (tmp_path / "metadata").write_text(json.dumps({"checkpoint-ts": cp + step}))
        io.clear()
        records = source.poll()
        assert {r.key for r in records} == {b"resolved"}  # the streams' resolved events at the new checkpoint
        assert not [p for p in io.listed + io.reads if any(p.startswith(d + "/") for d in done)]
        assert len(io.listed) == len(set(io.listed))  # no directory listed twice in a pass
        assert not [p for p in io.reads if p.endswith(".csv")]
        calls.append(len(io.listed) + len(io.reads))
    assert calls[0] == calls[1]


def test_a_long_lived_table_version_lists_only_its_newest_date_directory(tmp_path: Path) -> None:
    """Date directories accumulate under a live version: each pass lists the version directory and
    the newest date directory's `meta/`, not those of every day the version has lived."""
    from replicator.codec.storage_sink.schema import SchemaFile, TableColumn, render_schema_file, schema_file_name

    cols = (TableColumn("id", "INT", "11", nullable=False, is_pk=True),)
    sf = SchemaFile("db", "t", 100, "CREATE TABLE `db`.`t` (`id` INT NOT NULL, PRIMARY KEY (`id`))", 3, cols)
    (tmp_path / "db" / "t" / "meta").mkdir(parents=True)
    (tmp_path / "db" / "t" / "meta" / schema_file_name(sf)).write_bytes(render_schema_file(sf))
    io = Counting()
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path), poll_interval_s=0), io)
    for day in range(1, 11):
        ddir = tmp_path / "db" / "t" / "100" / f"2022-01-{day:02d}"
        (ddir / "meta").mkdir(parents=True)
        (ddir / "CDC000001.csv").write_text(f'"I","t","db",{100 + day},{day}\r\n')
        (ddir / "meta" / "CDC.index").write_text("CDC000001.csv\n")
        (tmp_path / "metadata").write_text(json.dumps({"checkpoint-ts": 100 + day}))
        if day == 1:
            source.start({p: None for p in source.partitions()})
        io.clear()
        rows = [e for r in source.poll() for e in source.decode(r) if isinstance(e, RowChange)]
        assert [e.commit_ts for e in rows] == [100 + day]
        metas = [p for p in io.listed if p.endswith("/meta") and "2022-" in p]
        assert len(metas) <= 2  # yesterday's (the newest before) and today's


def test_a_backlog_is_applied_in_bounded_steps(tmp_path: Path) -> None:
    """A backlog of many checkpoints read in one pass: the source reads the streams' files in
    commit-ts order and puts a resolved event after each, so the engine's loop (here with a
    memory warehouse and a small --max-buffer-rows) applies and lets go of rows in many steps:
    the rows held at once stay within a few files' worth, far below the backlog, and the tables
    are exact."""
    from replicator.engine.loop import StepRecord
    from replicator.engine.window import Step

    sim = Simulation(SimConfig(protocol="open", events=6000, seed=3, tables=4, ddl="all"))
    write_storage_sink(sim, str(tmp_path))
    largest = max(len([x for x in p.read_bytes().split(b"\r\n") if x]) for p in tmp_path.rglob("CDC*.csv"))
    source = StorageSinkSource(StorageSinkSettings(str(tmp_path), poll_interval_s=0, poll_max_records=100))
    wh, held = MemoryWarehouse(), [0]

    class Applier:
        steps = 0

        def apply(self, step: Step) -> StepRecord:
            wh.apply(step)
            self.steps += 1
            return {}

        def dead_letter(self, dead: Any) -> None:
            raise AssertionError(dead)

        def save_progress(self, progress: Progress, record: StepRecord | None) -> None:
            pass

    parts = source.partitions()
    windower = Windower(parts, Progress(), scope_of=ddl_scope)
    source.start({p: None for p in parts})
    known = set(parts)

    def decode(rec: Record) -> list[Any]:
        held[0] = max(held[0], windower.buffered_rows)
        tp = TP(rec.topic, rec.partition)
        if tp not in known:
            windower.add_partition(tp)
            known.add(tp)
        return source.decode(rec)

    applier = Applier()
    ControlLoop(source, decode, applier, windower, LoopOptions(until_caught_up=True, max_buffer_rows=100)).run()
    assert compare_tables(sim.expected, wh.tables()) == []
    assert windower.applied_ts == sim.expected.watermark
    assert windower.stats.rows >= 6000 and applier.steps > 20
    assert held[0] <= 4 * largest and held[0] < windower.stats.rows // 8, (held[0], largest)


def test_replay_from_a_commit_ts_keeps_every_ddl_and_the_rows_from_there(tmp_path: Path) -> None:
    from replicator.events import DdlEvent

    write_storage_sink(_sim(events=120), str(tmp_path))

    def events(from_ts: int) -> list[Any]:
        source = StorageSinkSource(StorageSinkSettings(str(tmp_path), from_ts=from_ts))
        source.start({p: None for p in source.partitions()})
        return [e for r in source.poll() for e in source.decode(r)]

    everything = events(0)
    rows = sorted(e.commit_ts for e in everything if isinstance(e, RowChange))
    cut = rows[len(rows) // 2]
    later = events(cut)
    assert [e for e in later if isinstance(e, DdlEvent)] == [e for e in everything if isinstance(e, DdlEvent)]
    assert sorted(e.commit_ts for e in later if isinstance(e, RowChange)) == [ts for ts in rows if ts >= cut]


def test_streams_read_and_applied_to_their_end_are_forgotten_and_not_listed_again(tmp_path: Path) -> None:
    """Issue 51: a follower's records do not grow with the changefeed's history. A table version
    the checkpoint passed a newer one of is read once more; once its rows are applied its streams
    leave the window and their cursors state.json, and `ended_versions` says per table up to which
    version nothing is left, so a restart neither lists nor reads them; the tables stay exact."""
    sim, replica, _ = _follow(tmp_path, seed=4)
    progress, wh = replica.saved
    assert compare_tables(sim.expected, wh.tables()) == []
    assert replica.retired and progress.ended_versions
    assert not replica.retired & {tp.topic for tp in progress.cursors}, "a forgotten stream's cursor was kept"
    kept = sum(1 for tp in progress.cursors if "/meta" not in tp.topic)
    # the same changefeed without forgetting keeps a cursor for every stream it ever read
    unforgetting = Replica(tmp_path / "live", "csv", forget=False)
    assert unforgetting.run()
    assert sum(1 for tp in unforgetting.saved[0].cursors if "/meta" not in tp.topic) >= kept + len(replica.retired)

    io = Counting()
    restarted = Replica(tmp_path / "live", "csv", io=io)
    restarted.saved = copy.deepcopy(replica.saved)
    assert restarted.run()
    ended = [str(v) for t, last in progress.ended_versions.items() for v in (tmp_path / "live" / t).iterdir()
             if v.name.isdigit() and int(v.name) <= last]
    assert ended and not [p for p in io.listed + io.reads if any(p == d or p.startswith(d + "/") for d in ended)]
    assert compare_tables(sim.expected, restarted.saved[1].tables()) == []
    assert restarted.saved[0].applied_ts == sim.expected.watermark
