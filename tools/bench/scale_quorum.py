"""The quorum part of the scale section: 3-node controller quorums of kwire and of stock Kafka
(the newest pinned release), side by side, taken to N partitions on B simulated brokers.

Each side is a static quorum (``tools.bench.brokers.start_quorum``, each formatted at its own
default metadata.version) with ``metadata.log.max.snapshot.interval.ms`` at 30 s, so that each
point ends with a snapshot of the whole image, and Kafka's heap at :data:`KAFKA_HEAP`. The
load generator (this process, Trio) drives, in order:

1. **registration storm**: B brokers (``simulated_broker``, one connection each to the active
   controller, heartbeating every 2 s) register at once; the time from the first registration
   sent to every broker unfenced;
2. **creation**: CreateTopics of one topic of :data:`PARTITIONS_PER_REQUEST` partitions (RF 3,
   fewer for the last) per request, one request at a time, to N partitions; the wall time,
   each request's latency, the quorum's CPU seconds;
3. **memory and snapshot**: each controller's resident memory (and, on Kafka, the heap in use
   after a full collection, ``jcmd GC.heap_info`` after ``GC.run``), and the size of the
   active controller's first snapshot that ends at or after the high watermark of the end of
   the creation (the whole image; the other side loads a copy of it);
4. **controlled shutdown**: one broker asks to shut down (``WantShutDown``); the time until the
   controller answers ``ShouldShutDown``, every partition it led having another leader;
5. **broker kill**, :data:`KILLS` times, one broker after another: a broker that leads its
   share of the partitions and every one of :data:`~tools.bench.brokers.KILL_PARTITIONS` of a
   topic made for it stops heartbeating (a kill -9 as the controller sees it); the time from
   then, and from the end of its session (its last answered heartbeat, as sent, plus
   ``broker.session.timeout.ms``), to the append time of the last batch that gave any partition
   another leader, once the made topic's all have one and a second has passed with no more
   such batches, read from the active controller's log; the median of the kills. Kafka 4.x
   looks for expired sessions every ``broker.session.timeout.ms`` / 8 (1.125 s), so its figure
   from the session's end varies by that much with the check's phase (kwire's check also runs
   as the oldest session ends). The broker stops as soon as a heartbeat of it is answered, on
   both sides, so that the figure from the kill is the session timeout plus the figure from
   the session's end, not also a phase of the heartbeat's 2 s interval;
6. **zonal outage**: a third of the brokers stop heartbeating at once; the time from then to
   the append time of the batch that fenced the last of them, read from the active
   controller's log (``broker.session.timeout.ms``, 9 s, is in it on both sides);
7. **failover**: kill -9 of the active controller; the time to the first CreateTopics (one
   partition) the new active controller answers without error;
8. **restart**: the killed controller starts again, loads its snapshot and replays its log;
   the time until the leader reports its log end offset at the high watermark of the moment
   it was started (DescribeQuorum).

A step that fails ends that side's run with the reason in its row; the figures before it stay.
"""

from __future__ import annotations

import random
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.bench.brokers import (
    CLUSTER_ID,
    FIRST_BROKER_ID,
    HEARTBEAT_INTERVAL_MS,
    KILL_PARTITIONS,
    START_TIMEOUT_S,
    Window,
    active_controller_port,
    create_led_topic,
    simulated_broker,
    start_node,
    start_quorum,
    wait_finalized,
)
from tools.bench.log_tail import LogTail, leader_moves
from tools.bench.quorum import cpu_seconds
from tools.local_cluster import stop_processes

PARTITIONS_PER_REQUEST = 5_000
"""Partitions of each CreateTopics. A request may write at most 10,000 records
(``QuorumController.MAX_RECORDS_PER_USER_OP``), so a topic of 10,000 partitions (10,001 records)
is refused by both sides."""
KAFKA_HEAP = "-Xmx6g"
SNAPSHOT_INTERVAL_MS = 30_000
SESSION_TIMEOUT_MS = 9000
STEP_TIMEOUT_S = 600.0
CREATE_TIMEOUT_S = 1200.0
"""The creation of a point's partitions ends the side's run when it takes longer (a quorum
that keeps losing its leader may never finish)."""
NODES = 3
KILLS = 3
"""Brokers killed one after another in the broker-kill step."""


@dataclass(slots=True)
class QuorumRow:
    """One side's figures at one point (seconds unless named otherwise); ``error`` says where
    and why a run stopped."""

    implementation: str
    partitions: int
    brokers: int
    storm_s: float | None = None
    create_s: float | None = None
    create_p50_ms: float | None = None
    create_max_ms: float | None = None
    create_cpu_s: float | None = None
    rss_mib: list[float] = field(default_factory=list)
    heap_used_mib: list[float] = field(default_factory=list)
    snapshot_bytes: int | None = None
    shutdown_s: float | None = None
    kill_s: float | None = None
    kill_past_expiry_s: float | None = None
    outage_s: float | None = None
    failover_s: float | None = None
    restart_s: float | None = None
    retries: int = 0
    """Requests asked again after NOT_CONTROLLER or a lost connection (leadership moved)."""
    snapshot_path: str | None = None
    """A copy of the active controller's first snapshot after the creation (the other side's
    loader reads it)."""
    foreign_load_s: float | None = None
    """On Kafka's row: the time kwire took to load that snapshot of Kafka's
    (``tools.bench.scale.measure_load``)."""
    error: str | None = None


def rss_bytes(pid: int | str = "self") -> int:
    """Resident memory of process ``pid`` (this one by default), from ``/proc``; 0 when the
    kernel does not say."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _heap_used_mib(pid: int) -> float | None:
    """A JVM's heap in use after a full collection (``jcmd``), None when jcmd cannot say."""
    from tools.stock_kafka import java_executable

    jcmd = str(Path(java_executable()).with_name("jcmd"))
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=120, check=True)
        info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"heap\s+total\s+(\d+)K,\s+used\s+(\d+)K", info.stdout)
    return None if found is None else int(found.group(2)) / 1024


def _fences(batches: list[Any], brokers: set[int]) -> dict[int, int]:
    """Broker id -> append time (ms) of the first of metadata log ``batches``
    (:meth:`~tools.bench.log_tail.LogTail.read`) that fenced it (BrokerRegistrationChangeRecord
    Fenced=1, or FenceBrokerRecord), for ``brokers``."""
    from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
    from messages.generated.fence_broker_record import FenceBrokerRecord
    from messages.metadata import decode_record

    keys = {BrokerRegistrationChangeRecord.API_KEY, FenceBrokerRecord.API_KEY}
    fenced: dict[int, int] = {}
    for batch in batches:
        if batch.is_control:
            continue
        for value in batch.iter_values():
            if value is None or len(value) < 2 or value[1] not in keys:
                continue
            message, _ = decode_record(value)
            broker = getattr(message, "broker_id", None)
            if broker not in brokers:
                continue
            if isinstance(message, FenceBrokerRecord) or getattr(message, "fenced", 0) == 1:
                fenced.setdefault(broker, batch.max_timestamp)
    return fenced


def _newest_snapshot(segment_dir: Path, min_offset: int) -> Path | None:
    """The newest ``.checkpoint`` under ``segment_dir`` that ends at or after ``min_offset``
    (its name's offset): one holding the whole image at the end of the creation."""
    found = [p for p in segment_dir.glob("*.checkpoint") if int(p.name.split("-")[0]) >= min_offset]
    return max(found, default=None, key=lambda p: p.name)


NOT_CONTROLLER = 41
TOPIC_ALREADY_EXISTS = 36


def _reason(exc: BaseException) -> str:
    """What failed, naming the exceptions inside an exception group (a task of the load
    generator's nursery) rather than the group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def _create_anywhere(ports: list[int], name: str, partitions: int) -> tuple[int, int]:
    """CreateTopics of one topic at the active controller of the moment, asked again (of the
    active controller then) after NOT_CONTROLLER or a lost connection, as an admin client
    does: ``(error code, times asked again)``. TOPIC_ALREADY_EXISTS after a retry is the
    earlier attempt having committed: no error."""
    import trio

    retries = 0
    while True:
        try:
            error = await _create(await active_controller_port(ports), name, partitions)
        except (OSError, EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            error = NOT_CONTROLLER  # the connection went with the controller
        if error == TOPIC_ALREADY_EXISTS and retries:
            return 0, retries
        if error != NOT_CONTROLLER:
            return error, retries
        retries += 1
        await trio.sleep(0.1)


async def _create(port: int, name: str, partitions: int) -> int:
    """CreateTopics of one topic; its error code."""
    from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
    from server.net.client import open_connection

    async with await open_connection("127.0.0.1", port, "bench-admin", request_timeout_ms=int(STEP_TIMEOUT_S * 1000)) as admin:
        answer = await admin.request(CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=3)],
            timeout_ms=int(STEP_TIMEOUT_S * 1000),
        ), 7)
    return int(answer.topics[0].error_code)


async def _drive(row: QuorumRow, kind: str, root: Path, procs: list[subprocess.Popen[bytes]], ports: list[int],
                 restart: Any) -> None:
    import trio

    port = await active_controller_port(ports)
    active = ports.index(port)
    segment_dir = root / f"{kind}-{active + 1}" / "__cluster_metadata-0"
    finalized = await wait_finalized(port)
    ready = 0

    def unfenced() -> None:
        nonlocal ready
        ready += 1

    shut_down_s: list[float] = []
    window = Window(float("inf"), float("inf"))
    rng = random.Random(row.partitions)
    ids = [FIRST_BROKER_ID + i for i in range(row.brokers)]
    scopes = {broker_id: trio.CancelScope() for broker_id in ids}
    leaving = trio.Event()
    contact: dict[int, float] = {}

    async def broker(broker_id: int) -> None:
        with scopes[broker_id]:
            await simulated_broker(port, broker_id, finalized, window, rng, unfenced, ports=ports,
                                   shutdown=leaving if broker_id == ids[0] else None, shut_down=shut_down_s.append,
                                   contact=contact)

    async with trio.open_nursery() as nursery:
        started = time.monotonic()
        for broker_id in ids:
            nursery.start_soon(broker, broker_id)
        with trio.move_on_after(START_TIMEOUT_S):
            while ready < row.brokers:
                await trio.sleep(0.05)
        if ready < row.brokers:
            row.error = f"storm: {ready} of {row.brokers} brokers unfenced in {START_TIMEOUT_S:.0f} s"
            nursery.cancel_scope.cancel()
            return
        row.storm_s = time.monotonic() - started

        pids = [proc.pid for proc in procs]
        cpu_before = cpu_seconds(pids)
        latencies: list[float] = []
        started = time.monotonic()
        left, n = row.partitions, 0
        while left > 0:
            if time.monotonic() - started > CREATE_TIMEOUT_S:
                row.error = f"creation: {row.partitions - left:,} of {row.partitions:,} partitions in {CREATE_TIMEOUT_S:.0f} s"
                nursery.cancel_scope.cancel()
                return
            count = min(PARTITIONS_PER_REQUEST, left)
            sent = time.monotonic()
            error, retries = await _create_anywhere(ports, f"scale-{n}", count)
            row.retries += retries
            latencies.append((time.monotonic() - sent) * 1000)
            if error != 0:
                row.error = f"creation: CreateTopics of scale-{n} answered error {error}"
                nursery.cancel_scope.cancel()
                return
            left, n = left - count, n + 1
        row.create_s = time.monotonic() - started
        row.create_cpu_s = cpu_seconds(pids) - cpu_before
        latencies.sort()
        row.create_p50_ms, row.create_max_ms = latencies[len(latencies) // 2], latencies[-1]
        from tools.quorum_client import describe

        created_end = (await describe(",".join(f"127.0.0.1:{p}" for p in ports))).partition.high_watermark
        with trio.move_on_after(SNAPSHOT_INTERVAL_MS / 1000 * 2 + 60):
            while (snapshot := _newest_snapshot(segment_dir, created_end)) is None:
                await trio.sleep(0.5)
            row.snapshot_bytes = snapshot.stat().st_size
            row.snapshot_path = str(shutil.copy(snapshot, root / f"after-creation-{snapshot.name}"))
        row.rss_mib = [rss_bytes(pid) / 2**20 for pid in pids]
        if kind == "kafka":
            heaps = [await trio.to_thread.run_sync(_heap_used_mib, pid) for pid in pids]
            row.heap_used_mib = [h for h in heaps if h is not None]

        leaving.set()
        with trio.move_on_after(STEP_TIMEOUT_S):
            while not shut_down_s:
                await trio.sleep(0.05)
        if not shut_down_s:
            row.error = "controlled shutdown: no ShouldShutDown"
            nursery.cancel_scope.cancel()
            return
        row.shutdown_s = shut_down_s[0]

        # brokers die one after another: ids[0] has shut down and ids[1::3] are the zone, so
        # each of ids[2::3] leads its share and the made topic's partitions, followed by three
        # of ids[3::3], which stay
        kills: list[tuple[float, float]] = []
        followers = ids[3::3][:3]
        for n, victim in enumerate(ids[2::3][:KILLS]):
            port = await active_controller_port(ports)  # leadership may have moved meanwhile
            segment_dir = root / f"{kind}-{ports.index(port) + 1}" / "__cluster_metadata-0"
            topic_id = await create_led_topic(port, victim, followers, name=f"scale-kill-{n}")
            tail = LogTail(segment_dir)
            answered = contact[victim]
            with trio.move_on_after(2 * HEARTBEAT_INTERVAL_MS / 1000):
                while contact[victim] == answered:  # stopped just after an answered heartbeat
                    await trio.sleep(0.002)
            killed_ms = time.time() * 1000
            scopes[victim].cancel()
            expiry_ms = contact[victim] * 1000 + SESSION_TIMEOUT_MS
            deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + STEP_TIMEOUT_S
            moved: dict[int, int] = {}
            last_move: int | None = None
            while time.monotonic() < deadline:
                await trio.sleep(1.0)
                found, newest = leader_moves(await trio.to_thread.run_sync(tail.read), topic_id, victim)
                moved = found | moved  # the first move of each partition stands
                if newest is not None:
                    last_move = newest
                elif len(moved) == KILL_PARTITIONS:
                    break  # every made partition moved, and a second passed without another move
            if len(moved) < KILL_PARTITIONS or last_move is None:
                row.error = f"broker kill {n + 1}: {len(moved)} of {KILL_PARTITIONS} partitions got another leader"
                nursery.cancel_scope.cancel()
                return
            kills.append(((last_move - killed_ms) / 1000, (last_move - expiry_ms) / 1000))
        row.kill_s = statistics.median(k for k, _ in kills)
        row.kill_past_expiry_s = statistics.median(e for _, e in kills)

        zone = set(ids[1::3])
        tail = LogTail(segment_dir)
        outage_ms = time.time() * 1000
        for broker_id in zone:
            scopes[broker_id].cancel()
        deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + STEP_TIMEOUT_S
        fenced: dict[int, int] = {}
        while time.monotonic() < deadline:
            await trio.sleep(1.0)
            fenced = _fences(await trio.to_thread.run_sync(tail.read), zone) | fenced
            if len(fenced) == len(zone):
                break
        if len(fenced) < len(zone):
            row.error = f"zonal outage: {len(fenced)} of {len(zone)} brokers fenced"
            nursery.cancel_scope.cancel()
            return
        row.outage_s = (max(fenced.values()) - outage_ms) / 1000

        nursery.cancel_scope.cancel()  # the brokers' connections are to the controller about to die

    port = await active_controller_port(ports)  # leadership may have moved meanwhile
    active = ports.index(port)
    procs[active].kill()
    killed = time.monotonic()
    others = [p for i, p in enumerate(ports) if i != active]
    with trio.move_on_after(STEP_TIMEOUT_S):
        while True:
            try:
                new_port = await active_controller_port(others)
                if await _create(new_port, "scale-failover", 1) == 0:
                    row.failover_s = time.monotonic() - killed
                    break
            except Exception:  # noqa: BLE001 - not yet: the quorum is electing
                pass
            await trio.sleep(0.05)
    if row.failover_s is None:
        row.error = "failover: no CreateTopics answered"
        return

    from tools.quorum_client import describe

    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports if p != port)
    target = (await describe(bootstrap)).partition.high_watermark
    restarted = time.monotonic()
    procs[active] = restart(active)
    with trio.move_on_after(STEP_TIMEOUT_S):
        while True:
            await trio.sleep(0.2)
            try:
                view = await describe(bootstrap, timeout_s=10)
            except Exception:  # noqa: BLE001 - asked again
                continue
            voter = next((v for v in view.partition.current_voters if v.replica_id == active + 1), None)
            if voter is not None and voter.log_end_offset >= target:
                row.restart_s = time.monotonic() - restarted
                break
    if row.restart_s is None:
        row.error = "restart: the restarted controller did not catch up"


def run_side(kind: str, name: str, partitions: int, brokers: int, base: Path) -> QuorumRow:
    """One side (``kind`` "kwire" or "kafka") at one point, under ``base``; the processes are
    stopped in every case."""
    import trio

    row = QuorumRow(name, partitions, brokers)
    root = base / f"{kind}-{partitions}"
    root.mkdir(parents=True)
    extra = (f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
             f"metadata.log.max.snapshot.interval.ms={SNAPSHOT_INTERVAL_MS}\n")
    procs: list[subprocess.Popen[bytes]] = []
    jvm_args = [KAFKA_HEAP] if kind == "kafka" else []
    try:
        procs, ports = start_quorum(kind, root, NODES, extra, jvm_args=jvm_args)

        def restart(index: int) -> subprocess.Popen[bytes]:
            name = f"{kind}-{index + 1}"
            return start_node(kind, root / f"{name}.properties", root / f"{name}.restart.out",
                              root / f"logs-{index + 1}-restart", jvm_args=jvm_args)

        trio.run(_drive, row, kind, root, procs, ports, restart)
    except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
        row.error = _reason(exc)
    finally:
        stop_processes(procs, timeout_s=30)
    return row


__all__ = ["CLUSTER_ID", "QuorumRow", "rss_bytes", "run_side"]
