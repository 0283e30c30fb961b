"""A node writes metadata snapshots on Kafka's triggers, cleans its log by retention, and starts
again from its newest snapshot (KIP-630; ``server.node.snapshots``).

A standalone node runs ten minutes of virtual time with the active controller's NoOpRecord every
500 ms, segments of 4 KiB, a snapshot every 30 s and a retention of 60 s: the log it keeps stays
bounded (a few minutes of records at most, while an unbounded log would hold all 1,200 NoOps),
older snapshots and the bootstrap checkpoint go, and a restarted node loads the newest snapshot
into the same image and keeps leading. The snapshot's content is the controller's image
(``ControlManagers.snapshot_records``) behind the kraft.version and voters of the log.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from messages.metadata import encode_record
from server.config import KRaftConfig
from server.controller import stepping
from server.controller.host import SnapshotToWrite
from server.failpoints import parse_action
from server.node import Node, snapshot_files
from server.node.forked import build_in_child
from server.raft.roles import Leader
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, read_snapshot
from tests.server.test_node import _free_port, _inline, _until
from tools.storage_format import format_standalone

RUN_MS = 600_000
SNAPSHOT_INTERVAL_MS = 30_000
RETENTION_MS = 60_000
SEGMENT_BYTES = 4096


def _config(data: Path, port: int, in_child: bool = True) -> KRaftConfig:
    return KRaftConfig.from_properties(
        {
            "process.roles": "controller",
            "node.id": "1",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{port}",
            "metadata.log.dir": str(data),
            "log.dirs": str(data),
            "metadata.log.max.snapshot.interval.ms": str(SNAPSHOT_INTERVAL_MS),
            "metadata.max.retention.ms": str(RETENTION_MS),
            "internal.metadata.log.segment.bytes": str(SEGMENT_BYTES),
            "kwire.metadata.snapshot.build.in.child": str(in_child).lower(),
        }
    )


@pytest.mark.parametrize(
    ("in_child", "fork_min_records", "forks"),
    [(True, 0, True), (False, 0, False), (True, snapshot_files.FORK_MIN_IMAGE_RECORDS, False)],
    ids=["built-in-a-child", "built-on-the-loop", "too-small-to-fork"],
)
async def test_ten_minutes_of_no_ops_keep_a_bounded_log_and_restart_from_the_snapshot(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, in_child: bool, fork_min_records: int, forks: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The image here is a handful of records: only with no minimum does a child build it."""
    config = _config(tmp_path / "data", _free_port(), in_child)
    assert config.snapshot_build_in_child is in_child
    monkeypatch.setattr(snapshot_files, "FORK_MIN_IMAGE_RECORDS", fork_min_records)
    children: list[object] = []

    async def counted(build: Callable[[], bytes]) -> bytes:
        children.append(build)
        return await build_in_child(build)

    monkeypatch.setattr(snapshot_files, "build_in_child", counted)
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(1), run_blocking=_inline)
    widest = 0  # the most offsets the log held at once
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        start = trio.current_time()
        while trio.current_time() - start < RUN_MS / 1000:
            await trio.sleep(5)
            log = node.metadata_log
            assert log is not None
            widest = max(widest, log.log_end_offset - log.log_start_offset)
        log = node.metadata_log
        assert log is not None and node.controller is not None
        end_offset, start_offset = log.log_end_offset, log.log_start_offset
        segments, snapshots = len(log.segments), list(log.snapshots)
        first_segment = log.segments[0].base_offset
        image = node.controller.snapshot_records()
        node.stop()

    # one NoOp batch per 500 ms: ~1,200 batches written, at most a few minutes of them kept
    assert end_offset >= 1100, end_offset
    assert start_offset > end_offset - 600, (start_offset, end_offset)
    assert widest <= 600, widest  # snapshot interval + retention + cleaning interval, in NoOps
    assert segments <= 12, segments
    assert BOOTSTRAP_SNAPSHOT_ID not in snapshots and 1 <= len(snapshots) <= 4, snapshots
    newest = snapshots[-1]
    assert newest.end_offset >= start_offset

    # the snapshot holds the image, the kraft.version and the voter set
    content = read_snapshot(log.dir, newest)
    assert content.kraft_version == 1
    assert content.voters is not None and [v.voter_id for v in content.voters.voters] == [1]
    assert content.data_records()[0] == encode_record(image[0][0], image[0][1])  # metadata.version first

    assert bool(children) is forks, len(children)  # every snapshot came from a forked child, or none

    # a restarted node starts from the newest snapshot: same image, still the leader
    again = Node(config, rng=random.Random(2), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        await _until(lambda: again.core is not None and isinstance(again.core.state, Leader))
        # no checkpoint keeps the log start of the metadata log: it reopens at its first
        # segment, as Kafka's does
        assert again.metadata_log is not None and again.metadata_log.log_start_offset == first_segment
        assert again.controller is not None
        await _until(lambda: again.host.replayed_offset >= end_offset)
        restarted = again.controller.snapshot_records()
        assert [encode_record(r, v) for r, v in restarted] == [encode_record(r, v) for r, v in image]
        again.stop()


async def test_a_node_leads_while_the_snapshot_it_starts_from_is_still_loading(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.controller import host as host_module
    from storage.format import format_directories
    from tools.bench.scale import measure_point

    point = measure_point(4000, 3, tmp_path / "point")  # a snapshot of kraft.version 0: static voters
    port, data = _free_port(), tmp_path / "data"
    config = KRaftConfig.from_properties({
        "process.roles": "controller", "node.id": "1", "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "metadata.log.dir": str(data), "log.dirs": str(data),
    })
    format_directories(cluster_id="c2NhbGUtYmVuY2gtdGVzdA", node_id=1, directories=[str(data)],
                       metadata_log_dir=str(data), controller_listener_name="CONTROLLER", out=lambda line: None)
    partition_dir = tmp_path / "data" / "__cluster_metadata-0"
    partition_dir.mkdir(exist_ok=True)
    snapshot = Path(point["snapshot_path"])
    (partition_dir / snapshot.name).write_bytes(snapshot.read_bytes())
    monkeypatch.setattr(host_module, "SNAPSHOT_LOAD_RECORDS_PER_POLL", 50)  # about 80 slices
    node = Node(config, rng=random.Random(3), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        assert node.host.loading
        await _until(lambda: node.core is not None and isinstance(node.core.state, Leader))
        assert node.host.loading, "the core elected itself while the image was still being built"
        assert node.controller is not None and node.controller.active_epoch is None
        await _until(lambda: not node.host.loading and node.controller is not None
                     and node.controller.active_epoch is not None)
        assert node.controller.replication.partition_count == 4000
        node.stop()


def test_an_image_is_rebuilt_in_slices_sized_to_hold_the_loop_briefly() -> None:
    """The node sizes the host's slices so that each holds the event loop about
    ``LOAD_SLICE_S``: a slow slice makes the next smaller, a fast one larger, within bounds."""
    most = 20_000
    assert stepping.load_slice_records(20_000, 0.4, most) == int(20_000 * stepping.LOAD_SLICE_S / 0.4)
    assert stepping.load_slice_records(2_500, 0.005, most) == most
    assert stepping.load_slice_records(1_000, 60.0, most) == stepping.MIN_LOAD_SLICE_RECORDS
    assert stepping.load_slice_records(50, 1.0, 50) == 50  # a host of small slices keeps them
    assert stepping.load_slice_records(3_000, 0.0, most) == 3_000


async def test_a_snapshot_asked_for_during_another_build_is_built_after_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a snapshot is being built, the host's later triggers are not dropped: the newest
    one is built once the first is done (``SnapshotFiles.deferred``), so the log's newest
    snapshot follows the image even when no trigger comes after a slow build."""
    config = _config(tmp_path / "data", _free_port())
    release = trio.Event()
    started: list[tuple[int, float]] = []  # (snapshot end offset, virtual time) per build

    async def held(build: Callable[[], bytes]) -> bytes:
        if len(started) == 1:  # the first build takes three trigger intervals
            await release.wait()
        return build()  # in no child: a child's real time would let the mock clock jump

    original = snapshot_files.SnapshotFiles.start

    def recorded(self: snapshot_files.SnapshotFiles, snapshot: SnapshotToWrite) -> None:
        started.append((snapshot.snapshot_id.offset, trio.current_time()))
        original(self, snapshot)

    monkeypatch.setattr(snapshot_files, "build_in_child", held)
    monkeypatch.setattr(snapshot_files, "FORK_MIN_IMAGE_RECORDS", 0)  # the held "child" builds even this image
    monkeypatch.setattr(snapshot_files.SnapshotFiles, "start", recorded)
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(4), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: len(started) == 1)
        await trio.sleep(3.5 * SNAPSHOT_INTERVAL_MS / 1000)
        assert len(started) == 1, started  # the triggers meanwhile were deferred, not started
        log = node.metadata_log
        assert log is not None
        held_until = trio.current_time()
        release.set()
        await _until(lambda: len(started) >= 2 and log.snapshots[-1].end_offset >= started[1][0])
        node.stop()

    (first, _), (second, second_at) = started[0], started[1]
    # the second build started right after the first, from the newest trigger of the wait: about
    # three intervals of NoOps (one per 500 ms) past the first, not the first trigger after it
    assert second_at - held_until < 5, (second_at, held_until)
    assert 2.5 <= (second - first) * 500 / SNAPSHOT_INTERVAL_MS < 3.5, started
    assert [s.end_offset for s in log.snapshots].count(second) == 1


async def test_a_snapshot_write_failpoint_skips_snapshots_until_cleared(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``snapshot.write`` armed with ``drop`` (``server.failpoints``): the triggers fire and
    their snapshots are built but none is written; once cleared, the next trigger's is."""
    config = _config(tmp_path / "data", _free_port(), in_child=False)
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(5), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        assert node.core is not None and node.metadata_log is not None
        points, log = node.core.failpoints, node.metadata_log
        points.arm("snapshot.write", parse_action("drop"))
        written = [s.end_offset for s in log.snapshots]
        await _until(lambda: points.fired.get("snapshot.write", 0) >= 2, timeout_s=3 * SNAPSHOT_INTERVAL_MS / 1000)
        assert [s.end_offset for s in log.snapshots] == written
        points.clear()
        await _until(lambda: [s.end_offset for s in log.snapshots] != written, timeout_s=2 * SNAPSHOT_INTERVAL_MS / 1000)
        assert log.snapshots[-1].end_offset > max(written, default=0)
        node.stop()
