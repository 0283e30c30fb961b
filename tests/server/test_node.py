"""server.node: whole nodes on loopback sockets, in one Trio process.

* a standalone node (formatted as ``kafka-storage format --standalone``) elects itself, its
  high watermark advances, and kwire's own metadata-quorum tool sees it;
* DescribeCluster as a controller answers it (EndpointType 2 and 1), listing the controllers
  registered through ControllerRegistration (KIP-919), the node itself among them;
* three nodes with static voters elect one leader and elect another when it stops;
* at ``append.linger.ms`` 0, appends that queue while the node waits on the disk leave as one
  batch.

The autojump clock drives the timers. The nodes run their file I/O inline (the
``run_blocking`` seam) rather than in worker threads: the autojump clock jumps whenever every
task waits, and a task waiting for a thread would let virtual time race ahead of real work.
Only loopback socket waits remain, which the kernel answers at once; addresses are numeric so
that no name lookup goes to a thread either. (The thread path runs in the compat test, which
starts ``kwire run-standalone`` as a process.)
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from kwire.errors import Errors
from messages.generated.describe_cluster_request import DescribeClusterRequest
from server.config import KRaftConfig
from server.net.client import open_connection
from server.node import Node
from server.raft.accumulator import MAX_BATCH_SIZE_BYTES
from server.raft.events import AppendResult, ClientAppend, CommittedBatch
from server.raft.roles import Leader, Resigned
from server.raft.types import LeaderAndEpoch
from storage.control import read_kraft_batch
from storage.format import format_directories
from storage.quorum_state import FileQuorumStateStore
from storage.records import RecordBatch
from tools.local_cluster import free_ports
from tools.quorum_client import describe
from tools.storage_format import format_standalone


def _free_port() -> int:
    return free_ports(1)[0]


def _config(
    data: Path, node_id: int, port: int, voters: str | None = None, extra: dict[str, str] | None = None
) -> KRaftConfig:
    props = {**(extra or {}),
        "process.roles": "controller",
        "node.id": str(node_id),
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(data),
        "log.dirs": str(data),
    }
    if voters is None:
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{port}"
    else:
        props["controller.quorum.voters"] = voters
    return KRaftConfig.from_properties(props)


async def _inline(fn: Callable[[], Any]) -> Any:
    return fn()


async def _until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(0.05)


async def test_standalone_node_elects_itself_and_is_described(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kwire.node")
    port = _free_port()
    config = _config(tmp_path / "data", 1, port)
    assert format_standalone(config, out=lambda line: None)
    assert not format_standalone(config, out=lambda line: None)  # formatted once only
    node = Node(config, rng=random.Random(1), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        assert node.core is not None and isinstance(node.core.state, Leader)

        view = await describe(f"127.0.0.1:{port}")
        assert view.cluster_id == node.cluster_id
        partition = view.partition
        assert partition.leader_id == 1
        assert partition.leader_epoch == node.core.epoch >= 1
        first_hwm = partition.high_watermark
        assert first_hwm >= 1
        [voter] = partition.current_voters
        assert voter.replica_id == 1
        assert voter.replica_directory_id == node.directory_id
        assert voter.log_end_offset >= first_hwm
        assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in view.nodes] == [
            (1, [("CONTROLLER", "127.0.0.1", port)])
        ]

        # The active controller's NoOpRecords keep the high watermark moving.
        await trio.sleep(2)
        again = await describe(f"127.0.0.1:{port}")
        assert again.partition.high_watermark > first_hwm
        assert again.partition.leader_epoch == partition.leader_epoch
        # the epoch's first high watermark is logged once, as Kafka's LeaderState logs it
        committed = [r.getMessage() for r in caplog.records if "for the first time in epoch" in r.getMessage()]
        assert len(committed) == 1, committed
        assert f"for the first time in epoch {partition.leader_epoch} (epoch start offset" in committed[0]

        # quorum-state was written (kraft.version 1: data_version 1) with this node as leader
        store = FileQuorumStateStore.in_partition_dir(tmp_path / "data" / "__cluster_metadata-0")
        state = store.read_election_state()
        assert state is not None and state.leader_id == 1 and state.epoch == partition.leader_epoch
        assert store.read_data_version() == 1
        node.stop()


async def test_describe_cluster_as_a_controller(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    port = _free_port()
    config = _config(tmp_path / "data", 1, port)
    format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(2), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        # the controllers listed are the registered ones (KIP-919): the node registers itself
        await _until(lambda: node.controller is not None and 1 in node.controller.controllers)
        registration = node.controller.controllers[1]  # type: ignore[union-attr]
        assert registration.incarnation_id == node.incarnation_id
        assert registration.endpoints == (("CONTROLLER", "127.0.0.1", port, 0),)
        assert registration.features["kraft.version"] == (0, 1)
        conn = await open_connection("127.0.0.1", port)
        try:
            controllers = await conn.request(DescribeClusterRequest(endpoint_type=2), version=1)
            brokers = await conn.request(DescribeClusterRequest(endpoint_type=1), version=1)
            v0 = await conn.request(DescribeClusterRequest(), version=0)
        finally:
            await conn.aclose()
        assert controllers.error_code == Errors.NONE
        assert controllers.endpoint_type == 2
        assert controllers.cluster_id == node.cluster_id
        assert controllers.controller_id == 1
        assert [(b.broker_id, b.host, b.port) for b in controllers.brokers] == [(1, "127.0.0.1", port)]
        assert brokers.error_code == Errors.MISMATCHED_ENDPOINT_TYPE
        assert v0.error_code == Errors.INVALID_REQUEST
        node.stop()


async def test_node_refuses_an_unformatted_directory(tmp_path: Path) -> None:
    from storage.errors import FormatError

    node = Node(_config(tmp_path / "empty", 1, _free_port()), run_blocking=_inline)
    with pytest.raises(FormatError):
        await node.run()


async def test_three_static_voters_elect_a_leader_and_replace_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ports = {i: _free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    nodes: dict[int, Node] = {}
    for i, port in ports.items():
        data = tmp_path / f"node{i}"
        format_directories(
            cluster_id="kwire-test-cluster-0001",
            node_id=i,
            directories=[str(data)],
            metadata_log_dir=str(data),
            controller_listener_name="CONTROLLER",
            out=lambda line: None,
        )
        nodes[i] = Node(_config(data, i, port, voters), rng=random.Random(i), run_blocking=_inline)

    def leaders(among: dict[int, Node]) -> set[int]:
        return {
            i for i, n in among.items() if n.core is not None and isinstance(n.core.state, Leader)
        }

    def agreed(among: dict[int, Node]) -> int | None:
        """The leader every node in ``among`` follows, once there is exactly one."""
        found = leaders(among)
        if len(found) != 1:
            return None
        leader = next(iter(found))
        epoch = among[leader].epoch
        if all(n.leader_id == leader and n.epoch == epoch for n in among.values()):
            return leader
        return None

    async with trio.open_nursery() as nursery:
        for node in nodes.values():
            await nursery.start(node.run)
        await _until(lambda: agreed(nodes) is not None)
        first = agreed(nodes)
        assert first is not None
        first_epoch = nodes[first].epoch
        assert first_epoch is not None

        # the followers replicate: every high watermark reaches the leader's start of epoch
        leader_core = nodes[first].core
        assert leader_core is not None
        await _until(lambda: all(n.core is not None and n.core.high_watermark >= 1 for n in nodes.values()))
        view = await describe(f"127.0.0.1:{ports[first]}")
        assert view.partition.leader_id == first
        assert sorted(v.replica_id for v in view.partition.current_voters) == [1, 2, 3]

        # stop the leader without a goodbye: the other two elect a new one in a later epoch
        nodes[first].stop()
        rest = {i: n for i, n in nodes.items() if i != first}
        await _until(lambda: agreed(rest) is not None)
        second = agreed(rest)
        assert second is not None and second != first
        second_epoch = rest[second].epoch
        assert second_epoch is not None and second_epoch > first_epoch
        view = await describe(f"127.0.0.1:{ports[second]}")
        assert view.partition.leader_id == second
        for node in rest.values():
            node.stop()


def test_supported_features_cover_what_format_can_finalize() -> None:
    from server.node import MAX_METADATA_VERSION_LEVEL, supported_features
    from storage.features import FEATURES, LATEST_PRODUCTION

    ranges = {k.name: (k.min_version, k.max_version) for k in supported_features()}
    assert ranges.pop("metadata.version") == (1, MAX_METADATA_VERSION_LEVEL)
    assert MAX_METADATA_VERSION_LEVEL >= LATEST_PRODUCTION.level
    assert ranges == {name: (0, versions[-1].level) for name, versions in FEATURES.items()}
    assert ranges["kraft.version"] == (0, 1)


class _Batches:
    """A listener that keeps the values of each committed data batch."""

    def __init__(self) -> None:
        self.committed: list[list[bytes]] = []

    def handle_append_result(self, result: AppendResult) -> None:
        assert result.error_code == Errors.NONE

    def handle_commit(self, batch: CommittedBatch) -> None:
        if not batch.is_control:
            records = read_kraft_batch(RecordBatch(batch.data), validate_crc=True).records
            self.committed.append([bytes(r) for r in records])  # type: ignore[arg-type]

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


async def test_appends_queued_behind_a_disk_write_leave_as_one_batch(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Kafka's accumulator collects what arrives while its raft thread writes and fsyncs; here
    the appends queued on the node's channel meanwhile reach the core in one step."""
    port = _free_port()
    config = _config(tmp_path / "data", 1, port, extra={"controller.quorum.append.linger.ms": "0"})
    assert format_standalone(config, out=lambda line: None)
    gate = {"open": trio.Event(), "blocked": trio.Event()}
    gate["open"].set()

    async def gated(fn: Callable[[], Any]) -> Any:
        if not gate["open"].is_set():
            gate["blocked"].set()
            await gate["open"].wait()
        return fn()

    batches = _Batches()
    node = Node(config, rng=random.Random(1), run_blocking=gated, listener=batches)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        gate["open"] = trio.Event()
        epoch = node.epoch
        assert epoch is not None
        node.append((b"first",), epoch)
        await gate["blocked"].wait()  # the node waits on the disk
        for value in (b"a", b"b", b"c"):
            node.append((value,), epoch)
        gate["open"].set()
        await _until(lambda: any(b"c" in values for values in batches.committed))
        ours = [values for values in batches.committed if set(values) & {b"first", b"a", b"b", b"c"}]
        assert [b"a", b"b", b"c"] in ours, ours
        node.stop()


@asynccontextmanager
async def _standalone_leader(tmp_path: Path, linger_ms: int, listener: _Batches) -> AsyncIterator[tuple[Node, int]]:
    """A formatted one-node quorum at ``append.linger.ms`` ``linger_ms``, once it leads and its
    election's own writes are done: ``(node, epoch)``; stopped on leaving."""
    config = _config(tmp_path / "data", 1, _free_port(), extra={"controller.quorum.append.linger.ms": str(linger_ms)})
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(1), run_blocking=_inline, listener=listener)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        await trio.sleep(1)
        assert node.epoch is not None
        yield node, node.epoch
        node.stop()


async def test_appends_within_one_linger_reach_the_core_in_one_step(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``Node.append`` holds what a load generator appends every millisecond until the first
    append's linger ends: the core takes them in one step, not one per append, and the batch
    leaves no earlier and no later than Kafka's accumulator would let it (25 ms after the
    first append), with every append's offsets told to the listener."""
    results: list[AppendResult] = []
    batches = _Batches()
    batches.handle_append_result = results.append  # type: ignore[method-assign,assignment]
    steps_with_appends: list[tuple[int, int]] = []  # (step time, Node.append calls in it)
    values = [f"v{i}".encode() for i in range(20)]
    async with _standalone_leader(tmp_path, 25, batches) as (node, epoch):
        core = node.core
        assert core is not None
        step_many = core.step_many

        def counting(now_ms: int, events: Any) -> Any:
            appends = sum(isinstance(e, ClientAppend) and e.epoch is not None for e in events)
            if appends:
                steps_with_appends.append((now_ms, appends))
            return step_many(now_ms, events)

        core.step_many = counting  # type: ignore[method-assign]
        first_ms = node.now_ms()
        for value in values:
            node.append((value,), epoch)
            await trio.sleep(0.001)
        await _until(lambda: any(b"v19" in v for v in batches.committed))
    # one batch (a NoOpRecord of the controller's may share it)
    assert [[x for x in v if x.startswith(b"v")] for v in batches.committed if b"v0" in v] == [values]
    assert sum(n for _, n in steps_with_appends) == 20
    assert len(steps_with_appends) < 5, steps_with_appends  # one per append would be 20
    assert all(at_ms <= first_ms + 25 for at_ms, _ in steps_with_appends), (first_ms, steps_with_appends)
    assert all(r.error_code == Errors.NONE and r.last_offset == r.base_offset for r in results)
    offsets = [r.base_offset for r in sorted(results, key=lambda r: r.token)]
    assert len(offsets) == 20 and offsets == sorted(set(offsets))  # in append order


async def test_held_appends_that_fill_a_batch_leave_before_the_linger_ends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Held appends as big as a batch (8 MiB with the accumulator's framing) reach the core at
    once, as Kafka's accumulator drains a full batch without waiting for the linger."""
    batches = _Batches()
    async with _standalone_leader(tmp_path, 60_000, batches) as (node, epoch):
        started = trio.current_time()
        big = b"x" * (MAX_BATCH_SIZE_BYTES // 2)
        node.append((big,), epoch)
        node.append((big,), epoch)  # the two cannot share a batch: the first leaves at once
        await _until(lambda: any(len(v) == 1 and len(v[0]) == len(big) for v in batches.committed))
        assert trio.current_time() - started < 30  # well inside the minute's linger


async def test_a_restarted_former_leader_resigns_again_when_stopped_gracefully(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A node that restarts after leading starts Resigned (``QuorumState``); once it leads
    again, a graceful stop must still resign (EndQuorumEpoch to the voters) before it stops,
    not take the start-up resignation for this one and leave the voters to a fetch timeout.
    Rounds of graceful stops and restarts until restarted nodes have been stopped as leaders
    three times (whether the start-up resignation is seen before the stop depends on timing)."""
    ports = {i: _free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    configs = {}
    for i, port in ports.items():
        data = tmp_path / f"node{i}"
        format_directories(cluster_id="kwire-test-cluster-0001", node_id=i, directories=[str(data)],
                           metadata_log_dir=str(data), controller_listener_name="CONTROLLER", out=lambda line: None)
        configs[i] = _config(data, i, port, voters)
    nodes = {i: Node(c, rng=random.Random(i), run_blocking=_inline) for i, c in configs.items()}
    ended = {i: trio.Event() for i in nodes}
    restarted: set[int] = set()

    async def serve(node: Node, done: trio.Event, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await node.run(task_status=task_status)
        finally:
            done.set()

    def leader(exclude: int | None = None) -> int | None:
        among = {i: n for i, n in nodes.items() if i != exclude}
        found = [i for i, n in among.items() if n.core is not None and isinstance(n.core.state, Leader)]
        if len(found) == 1 and all(n.leader_id == found[0] for n in among.values()):
            return found[0]
        return None

    async with trio.open_nursery() as nursery:
        for i, node in nodes.items():
            await nursery.start(serve, node, ended[i])
        stops_of_restarted = 0
        for round_ in range(16):
            await _until(lambda: leader() is not None)
            stopped = leader()
            assert stopped is not None
            old = nodes[stopped]
            started = trio.current_time()
            await old.shutdown()
            assert old.core is not None and isinstance(old.core.state, Resigned), (round_, stopped, old.core.state)
            if stopped in restarted:
                stops_of_restarted += 1
                if stops_of_restarted == 3:
                    break
            await ended[stopped].wait()  # its directory lock is released
            restarted.add(stopped)
            nodes[stopped] = Node(configs[stopped], rng=random.Random(10 + round_), run_blocking=_inline)
            ended[stopped] = trio.Event()
            await nursery.start(serve, nodes[stopped], ended[stopped])
            # the voters heard EndQuorumEpoch: all agree on a successor inside a fetch timeout
            await _until(lambda: leader() is not None)
            assert trio.current_time() - started < configs[stopped].controller_quorum_fetch_timeout_ms / 1000
        else:
            raise AssertionError(f"restarted nodes were stopped as leaders {stops_of_restarted} times in 16 rounds")
        for node in nodes.values():
            node.stop()


async def test_the_heap_ages_each_time_the_log_grows_by_a_bound(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What replaying records made is frozen out of the collector's walks every
    ``AGE_AFTER_RECORDS`` records the log grows by, not only at snapshots and loads."""
    from server.node import driver

    aged: list[int] = []
    monkeypatch.setattr(driver, "AGE_AFTER_RECORDS", 10)
    batches = _Batches()
    async with _standalone_leader(tmp_path, 0, batches) as (node, epoch):
        assert node.core is not None
        log = node.core.log
        monkeypatch.setattr(driver, "age_heap", lambda: aged.append(log.log_end_offset))
        start = log.log_end_offset
        for n in range(45):
            node.append((f"a{n}".encode(),), epoch)
            await trio.sleep(0.001)
        await _until(lambda: log.log_end_offset >= start + 45)
        await trio.sleep(0.1)
    assert len(aged) >= 4, aged
    assert all(later - earlier >= 10 for earlier, later in zip(aged, aged[1:], strict=False)), aged


async def test_a_long_wait_on_the_log_is_logged_with_where_it_was_asked(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The driving task waits for each log operation; one that takes half the fetch timeout
    (here a flush held 1.5 s by a slow disk) is logged at WARN, naming the call's source."""
    caplog.set_level(logging.WARNING, logger="kwire.node")
    slow: list[str] = []

    async def run_blocking(fn: Callable[[], Any]) -> Any:
        if slow:
            await trio.sleep(1.5)  # the first call after the disk turned slow
            slow.clear()
        return fn()

    config = _config(tmp_path / "data", 1, _free_port())
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(1), run_blocking=run_blocking)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        await trio.sleep(1)
        assert not [r for r in caplog.records if "the driving task waited" in r.getMessage()]
        slow.append("on")
        await _until(lambda: any("the driving task waited" in r.getMessage() for r in caplog.records))
        node.stop()
    (message,) = [r.getMessage() for r in caplog.records if "the driving task waited" in r.getMessage()]
    assert "node 1: the driving task waited 1500 ms for" in message
    assert "server/node/" in message


async def test_small_log_writes_stay_on_the_event_loop_and_large_ones_go_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a ``run_blocking``, the commit path's writes and fsyncs (at most
    ``ON_LOOP_LOG_BYTES`` since the last fsync) run on the event loop, as Kafka's raft thread
    does them; a batch above it is written in a worker thread. Both commit."""
    from server.node import raft_target

    off_loop: list[str] = []
    run_sync = trio.to_thread.run_sync

    async def recording(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
        off_loop.append(getattr(fn, "__qualname__", repr(fn)))
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", recording)
    config = _config(tmp_path / "data", 1, _free_port(), extra={"controller.quorum.append.linger.ms": "0"})
    assert format_standalone(config, out=lambda line: None)
    batches = _Batches()
    node = Node(config, rng=random.Random(1), listener=batches)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        epoch = node.epoch
        assert epoch is not None
        await _until(lambda: node.core is not None and node.core.high_watermark is not None)
        off_loop.clear()
        node.append((b"small",), epoch)
        await _until(lambda: [b"small"] in batches.committed)
        log_io = ("write_log", "write_and_flush", "StorageRaftLog.flush")
        assert not [name for name in off_loop if any(part in name for part in log_io)], off_loop
        big = b"x" * (raft_target.ON_LOOP_LOG_BYTES + 1)
        node.append((big,), epoch)
        await _until(lambda: [big] in batches.committed)
        assert any("write_log" in name for name in off_loop), off_loop
        node.stop()
