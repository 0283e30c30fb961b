"""Brokers section: simulated brokers register with a controller quorum and heartbeat every
``broker.heartbeat.interval.ms`` (2 s, Kafka's default), kwire and Kafka side by side; then one
of them dies and the time until every partition it led has another leader is measured.

Each side is a three-voter static quorum (:func:`start_quorum`: ``kwire server-start`` on
directories kwire's ``storage format`` wrote; ``kafka.Kafka`` of the newest pinned release on
ones its own ``kafka-storage format`` wrote, so each runs at its own default metadata.version).
The load generator (this process, Trio) finds the active controller (DescribeCluster), opens
one connection per broker to it, as each Kafka broker keeps its own heartbeat channel,
registers every broker (v4, one log directory, the finalized features the controller's
ApiVersions reports), heartbeats each one until it is unfenced, and then keeps every broker
heartbeating at its interval from a random phase, as caught up.

Measured: the time from the first registration sent to every broker unfenced (each broker's
registration and its unfencing are controller writes); then, over the window that follows the
warm-up, heartbeat latency (request sent to answer read, p50/p99/max, every heartbeat in the
window), heartbeats answered per second, and the three controller processes' CPU seconds
(utime + stime, with reaped children's, ``/proc``; ``quorum.cpu_seconds``) per thousand
heartbeats. Then a topic of :data:`KILL_PARTITIONS` partitions is created, each led by the first
broker (replicas assigned by hand), that broker stops heartbeating (a kill -9 as the controller sees it), and the active controller's log is
read afterwards: the time from the kill to the append time of the last batch that gave one of
those partitions another leader (``broker.session.timeout.ms``, 9 s by default, plus the
controller's expiry check and the write). That time depends on where in its 2 s heartbeat
interval the broker died, so a second figure takes it from the session's end instead (the
broker's last answered heartbeat, as sent, plus the session timeout): the controller's own
delay in noticing the expiry and writing the new leaders (Kafka 4.x checks every
``broker.session.timeout.ms`` / 8, ``QuorumController``'s ``maybeFenceStaleBroker`` task;
kwire checks then and when the oldest session ends). Both sides share this machine with the load generator, whose own cost is the same
for both.

``--quick``: 50 brokers, 3 s warm-up, 5 s window (a smoke run); full: 1,000 brokers, 10 s
warm-up, 30 s window. Directories live under ``KWIRE_BENCH_DIR`` (default ``./build``) and are
removed afterwards; Kafka's row says why when Java or the jars are missing.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.bench.core import Result
from tools.bench.log_tail import LogTail, leader_moves
from tools.bench.quorum import cpu_seconds
from tools.local_cluster import stop_processes
from tools.stock_kafka import PINNED_VERSIONS

SECTION = "brokers"
KAFKA_VERSION = PINNED_VERSIONS[-1] if PINNED_VERSIONS else "(none pinned)"
HEARTBEAT_INTERVAL_MS = 2000
CLUSTER_ID = "YnJva2Vycy1iZW5jaC1xdQ"
FIRST_BROKER_ID = 1000
START_TIMEOUT_S = 240.0
KILL_PARTITIONS = 100
"""Partitions led by the broker that dies."""
KILL_TOPIC = "bench-broker-kill"
KILL_WAIT_S = 15.0
"""How long past the session timeout the new leaders are waited for."""


@dataclass(frozen=True, slots=True)
class Load:
    brokers: int
    warmup_s: float
    window_s: float
    description: str
    controllers: int = 3
    session_timeout_ms: int = 9000
    """``broker.session.timeout.ms`` of the controllers (Kafka's default)."""
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    """How often each simulated broker heartbeats (``broker.heartbeat.interval.ms``)."""


FULL = Load(1000, 10.0, 30.0, "1,000 brokers, 10 s warm-up, 30 s measured")
QUICK = Load(50, 3.0, 5.0, "quick: 50 brokers, 3 s warm-up, 5 s measured", controllers=1)


@dataclass(slots=True)
class Row:
    """One controller's figures (latencies in ms); ``error`` when the run gave none."""

    implementation: str
    p50: float | None = None
    p99: float | None = None
    max_ms: float | None = None
    heartbeats_per_s: float | None = None
    all_unfenced_s: float | None = None
    cpu_s_per_1000: float | None = None
    kill_to_new_leaders_s: float | None = None
    expiry_to_new_leaders_s: float | None = None
    """From the end of the dead broker's session (its last answered heartbeat, as sent, plus
    ``broker.session.timeout.ms``) to its partitions' new leaders: the controller's own delay."""
    errors: int = 0
    redirects: int = 0
    """Broker requests that found the leadership moved (NOT_CONTROLLER or a lost connection)
    and went to the new active controller."""
    error: str | None = None


@dataclass(slots=True)
class Window:
    """The measured interval (monotonic seconds) and the heartbeat latencies (ms) and errors
    seen in it."""

    start: float
    end: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def _properties(path: Path, data: Path, port: int, *, node_id: int, voters: str, extra: str = "") -> Path:
    """The properties of controller ``node_id`` of the static quorum ``voters``
    (``id@host:port,...``), ``extra`` lines appended."""
    path.write_text(
        f"process.roles=controller\nnode.id={node_id}\ncontroller.quorum.voters={voters}\n"
        f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
        f"log.dirs={data}\n" + extra,
        encoding="utf-8",
    )
    return path


def start_quorum(kind: str, root: Path, nodes: int, extra: str = "", *,
                 jvm_args: Sequence[str] = ()) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    """A static quorum of ``nodes`` controllers (``kind`` "kwire" or "kafka", node ids 1..n),
    each formatted under ``root`` at its own default metadata.version, ``extra`` lines in their
    properties, ``jvm_args`` for Kafka's JVMs: their processes (started so far, when one fails
    to start) and ports."""
    from tools.local_cluster import free_ports

    ports = free_ports(nodes)
    voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(ports))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, port in enumerate(ports):
            name = f"{kind}-{i + 1}"
            props = _properties(root / f"{name}.properties", root / name, port, node_id=i + 1, voters=voters, extra=extra)
            format_node(kind, props)
            procs.append(start_node(kind, props, root / f"{name}.out", root / f"logs-{i + 1}", jvm_args=jvm_args))
    except BaseException:
        stop_processes(procs, timeout_s=30)
        raise
    return procs, ports


def format_node(kind: str, props: Path) -> None:
    """Format the metadata directory of the controller ``props`` describes (``kind`` "kwire" or
    "kafka": kwire's ``storage format`` or stock ``kafka-storage.sh format``), cluster
    :data:`CLUSTER_ID`."""
    from tools import stock_kafka

    if kind == "kwire":
        subprocess.run([sys.executable, "-m", "tools.cli", "storage", "format", "-c", str(props), "-t", CLUSTER_ID],
                       check=True, capture_output=True)
    else:
        stock_kafka.run_tool(KAFKA_VERSION, "storage", ["format", "-t", CLUSTER_ID, "-c", props])


def start_node(kind: str, props: Path, out_path: Path, logs_dir: Path, *,
               jvm_args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start the controller ``props`` describes, its output to ``out_path`` (Kafka's log4j
    files under ``logs_dir``, ``jvm_args`` last among its JVM flags)."""
    from tools import stock_kafka

    with out_path.open("wb") as out:
        if kind == "kwire":
            return subprocess.Popen([sys.executable, "-m", "tools.cli", "server-start", str(props)], stdout=out, stderr=out)
        return stock_kafka.start_kafka_class(KAFKA_VERSION, "kafka.Kafka", [props], logs_dir=logs_dir,
                                             jvm_args=jvm_args, stdout=out.fileno(), stderr=out.fileno())


async def active_controller_port(ports: list[int]) -> int:
    """The port of the quorum's active controller, once one is known (DescribeCluster; asked
    again while no controller listens yet)."""
    import trio

    from server.net.client import KafkaConnectionError
    from tools.quorum_client import active_controller

    with trio.fail_after(START_TIMEOUT_S):
        while True:
            try:
                _, _, port = await active_controller(",".join(f"127.0.0.1:{p}" for p in ports))
                return port
            except (OSError, KafkaConnectionError):
                await trio.sleep(0.2)


async def wait_finalized(port: int) -> dict[str, int]:
    """The finalized features, once the controller reports a metadata.version."""
    import trio

    from tools.api_versions import describe

    with trio.fail_after(START_TIMEOUT_S):
        while True:
            try:
                info = await describe(f"127.0.0.1:{port}", "bench-brokers", 5000)
            except OSError:
                info = None
            if info is not None:
                levels = {f["name"]: f["maxVersionLevel"] for f in info["finalizedFeatures"]}
                if levels.get("metadata.version", 0) > 0:
                    return levels
            await trio.sleep(0.2)


NOT_CONTROLLER = 41


async def simulated_broker(port: int, broker_id: int, finalized: dict[str, int], window: Window, rng: random.Random,
                           unfenced: Any, interval_ms: int = HEARTBEAT_INTERVAL_MS, *,
                           shutdown: Any = None, shut_down: Any = None, ports: list[int] | None = None,
                           contact: dict[int, float] | None = None, redirected: Any = None) -> None:
    """One broker on its own connection: registers, heartbeats until unfenced (then calls
    ``unfenced``), and heartbeats every interval, recording the latencies inside ``window``,
    until cancelled. Once ``shutdown`` (a ``trio.Event``) is set it shuts down as a broker in
    controlled shutdown does: heartbeats asking to (``WantShutDown``) until the controller
    answers ``ShouldShutDown``, then calls ``shut_down`` with the seconds from the first such
    heartbeat sent, and returns. With ``ports`` (the quorum's), an answer of NOT_CONTROLLER or
    a lost connection sends it to the active controller of the moment, as a broker's
    controller channel does (``redirected``, when given, is called each time); without, a lost
    connection ends it (an exception) and NOT_CONTROLLER is an answer like any other error, which
    leaves the broker asking the same node for ever. ``contact`` maps the broker
    id to the wall time (``time.time()``, seconds) at which its last answered heartbeat was sent:
    the controller's session for it ends ``broker.session.timeout.ms`` after that at the
    earliest."""
    import trio

    from kwire.uuid import Uuid
    from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
    from messages.generated.broker_registration_request import (
        BrokerRegistrationRequest,
        Feature,
        Listener,
    )
    from server.net.client import KafkaConnection, open_connection

    features = [
        Feature(name=name, min_supported_version=1 if name == "metadata.version" else 0, max_supported_version=level)
        for name, level in sorted(finalized.items())
    ]
    registration = BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=Uuid.from_longs(broker_id, 1),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
        features=features, rack=None, log_dirs=[Uuid.from_longs(broker_id, 77)],
    )
    timeout_ms = int(START_TIMEOUT_S * 1000)
    conn: KafkaConnection | None = None

    async def ask(body: Any, version: int) -> Any:
        nonlocal conn
        while True:
            try:
                if conn is None:
                    target = port if ports is None else await active_controller_port(ports)
                    conn = await open_connection("127.0.0.1", target, f"broker-{broker_id}", request_timeout_ms=timeout_ms)
                answer = await conn.request(body, version)
                if ports is None or answer.error_code != NOT_CONTROLLER:
                    return answer
            except OSError:
                if ports is None:
                    raise
            if redirected is not None:
                redirected()
            if conn is not None:
                await conn.aclose()
                conn = None
            await trio.sleep(0.1)

    try:
        while True:
            answer = await ask(registration, 4)
            if answer.error_code == 0:
                break
            await trio.sleep(0.1)
        beat = BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=answer.broker_epoch, current_metadata_offset=1 << 62,
            want_fence=False, want_shut_down=False,
        )
        while (await ask(beat, 1)).is_fenced:
            await trio.sleep(0.05)
        unfenced()
        await trio.sleep(rng.random() * interval_ms / 1000)
        while True:
            if shutdown is not None and shutdown.is_set():
                leaving = BrokerHeartbeatRequest(
                    broker_id=broker_id, broker_epoch=answer.broker_epoch, current_metadata_offset=1 << 62,
                    want_fence=False, want_shut_down=True,
                )
                asked = time.monotonic()
                while not (await ask(leaving, 1)).should_shut_down:
                    await trio.sleep(0.02)
                shut_down(time.monotonic() - asked)
                return
            sent, sent_wall = time.monotonic(), time.time()
            response = await ask(beat, 1)
            done = time.monotonic()
            if contact is not None and response.error_code == 0:
                contact[broker_id] = sent_wall
            if window.start <= sent < window.end:
                window.latencies.append((done - sent) * 1000)
                if response.error_code != 0:
                    window.errors += 1
            await trio.sleep(max(0.0, sent + interval_ms / 1000 - time.monotonic()))
    finally:
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()


async def create_led_topic(port: int, leader: int, others: list[int], name: str = KILL_TOPIC) -> Any:
    """Topic ``name``: :data:`KILL_PARTITIONS` partitions whose replicas are ``leader`` first
    and two of ``others``, so that ``leader`` leads them all. Returns its topic id (a
    ``kwire.uuid.Uuid``) once the controller answered (its records committed). Raises
    NotController when the node at ``port`` is no longer the active controller, RuntimeError
    for another error."""
    from messages.generated.create_topics_request import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
    )
    from server.net.client import open_connection

    topic = CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[
            CreatableReplicaAssignment(partition_index=i, broker_ids=[leader, others[i % len(others)], others[(i + 1) % len(others)]])
            for i in range(KILL_PARTITIONS)
        ],
    )
    async with await open_connection("127.0.0.1", port, "bench-admin") as conn:
        response = await conn.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
    errors = [(t.name, t.error_code, t.error_message) for t in response.topics if t.error_code != 0]
    if errors and all(code == NOT_CONTROLLER for _, code, _ in errors):
        raise NotController(f"CreateTopics: {errors}")
    if errors:
        raise RuntimeError(f"CreateTopics failed: {errors}")
    return response.topics[0].topic_id


class NotController(RuntimeError):
    """A request was answered NOT_CONTROLLER: the leadership moved."""


async def _create_on_active(ports: list[int], leader: int, others: list[int]) -> tuple[int, Any]:
    """:func:`create_led_topic` on the quorum's active controller, found again while the
    answer is NOT_CONTROLLER (within :data:`START_TIMEOUT_S`): the port that created it and the
    topic id."""
    import trio

    with trio.fail_after(START_TIMEOUT_S):
        while True:
            port = await active_controller_port(ports)
            try:
                return port, await create_led_topic(port, leader, others)
            except NotController:
                await trio.sleep(0.1)


async def _drive(port: int, ports: list[int], pids: list[int], load: Load,
                 log_dir_of: Callable[[int], Path]) -> Row | str:
    """The run against the quorum at ``ports``, whose active controller was at ``port`` when it
    began (module docstring). The brokers follow the leadership where it moves, as Kafka's
    brokers do; the topic whose leader dies is created on the active controller of that
    moment, and ``log_dir_of(port)`` is the metadata log's partition directory of the node at
    ``port``."""
    import trio

    finalized = await wait_finalized(port)
    ready = 0
    redirects = 0

    def unfenced() -> None:
        nonlocal ready
        ready += 1

    def redirected() -> None:
        nonlocal redirects
        redirects += 1

    window = Window(float("inf"), float("inf"))
    rng = random.Random(5)
    started = time.monotonic()
    scopes = {FIRST_BROKER_ID + i: trio.CancelScope() for i in range(load.brokers)}
    contact: dict[int, float] = {}

    async def broker(broker_id: int) -> None:
        with scopes[broker_id]:
            await simulated_broker(port, broker_id, finalized, window, rng, unfenced, load.heartbeat_interval_ms,
                                   ports=ports, contact=contact, redirected=redirected)

    async with trio.open_nursery() as nursery:
        for broker_id in scopes:
            nursery.start_soon(broker, broker_id)
        with trio.move_on_after(START_TIMEOUT_S):
            while ready < load.brokers:
                await trio.sleep(0.1)
        if ready < load.brokers:
            nursery.cancel_scope.cancel()
            note = f" ({redirects} requests redirected to a new active controller)" if redirects else ""
            return f"only {ready} of {load.brokers} brokers were unfenced within {START_TIMEOUT_S:.0f} s{note}"
        all_unfenced_s = time.monotonic() - started
        window.start = time.monotonic() + load.warmup_s
        window.end = window.start + load.window_s
        await trio.sleep(load.warmup_s)
        cpu_before = cpu_seconds(pids)
        await trio.sleep(load.window_s)
        cpu_after = cpu_seconds(pids)
        # one broker dies: the partitions it led get other leaders once its session expires
        victim, *others = sorted(scopes)[:4]
        port, topic_id = await _create_on_active(ports, victim, others)  # answered once its records committed
        tail = LogTail(log_dir_of(port))
        killed_at_ms = time.time() * 1000
        scopes[victim].cancel()
        expiry_ms = contact[victim] * 1000 + load.session_timeout_ms
        deadline = time.monotonic() + load.session_timeout_ms / 1000 + KILL_WAIT_S
        moved: dict[int, int] = {}
        while len(moved) < KILL_PARTITIONS and time.monotonic() < deadline:
            await trio.sleep(0.5)
            found, _ = leader_moves(await trio.to_thread.run_sync(tail.read), topic_id, victim)
            moved = found | moved  # the first move of each partition stands
        nursery.cancel_scope.cancel()
    latencies = sorted(window.latencies)
    if not latencies:
        return "no heartbeat in the window"

    def rank(q: float) -> float:
        return latencies[min(len(latencies) - 1, max(0, round(q * len(latencies)) - 1))]

    row = Row(
        implementation="",
        p50=rank(0.50), p99=rank(0.99), max_ms=latencies[-1],
        heartbeats_per_s=len(latencies) / load.window_s,
        all_unfenced_s=all_unfenced_s,
        cpu_s_per_1000=(cpu_after - cpu_before) / len(latencies) * 1000,
        errors=window.errors,
        redirects=redirects,
    )
    if len(moved) == KILL_PARTITIONS:
        row.kill_to_new_leaders_s = (max(moved.values()) - killed_at_ms) / 1000
        row.expiry_to_new_leaders_s = (max(moved.values()) - expiry_ms) / 1000
    else:
        row.error = f"{len(moved)} of {KILL_PARTITIONS} partitions got a new leader after the broker died"
    return row


def run_side(kind: str, name: str, load: Load, base: Path) -> Row:
    """One side's run (``kind`` "kwire" or "kafka") under ``base``; a Row with ``error`` set
    when it gave no figures, and then the controllers' output is kept (:func:`keep_output`).
    The controller processes are stopped in every case."""
    import trio

    root = base / kind
    root.mkdir(parents=True)
    procs: list[subprocess.Popen[bytes]] = []
    row: Row | None = None
    try:
        procs, ports = start_quorum(
            kind, root, load.controllers, f"broker.session.timeout.ms={load.session_timeout_ms}\n"
        )
        port = trio.run(active_controller_port, ports)

        def log_dir_of(port: int) -> Path:
            return root / f"{kind}-{ports.index(port) + 1}" / "__cluster_metadata-0"

        outcome = trio.run(_drive, port, ports, [p.pid for p in procs], load, log_dir_of)
        row = Row(name, error=outcome) if isinstance(outcome, str) else outcome
        row.implementation = name
    except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
        row = Row(name, error=f"{type(exc).__name__}: {exc}")
    finally:
        stop_processes(procs, timeout_s=30)
    if row.error is not None:
        kept = keep_output(root, base.parent / f"{base.name}-{kind}-output")
        if kept is not None:
            row.error += f" (controller output kept in {kept})"
    return row


def keep_output(root: Path, dest: Path) -> Path | None:
    """Copy the controllers' output under ``root`` (``*.out``, Kafka's ``logs-*`` directories)
    to ``dest``, which outlives the run's directories: the evidence of a failed run. None when
    there was none."""
    outputs = sorted(root.glob("*.out")) + sorted(p for p in root.glob("logs-*") if p.is_dir())
    if not outputs:
        return None
    dest.mkdir(parents=True, exist_ok=True)
    for path in outputs:
        if path.is_dir():
            shutil.copytree(path, dest / path.name, dirs_exist_ok=True)
        else:
            shutil.copy2(path, dest / path.name)
    return dest


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def run(args: Any) -> list[Result]:
    from tools.bench.quorum import kafka_problem

    load = QUICK if getattr(args, "quick", False) else FULL
    base_dir = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base_dir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="kwire-bench-brokers-", dir=base_dir))
    kafka_name = f"Kafka {KAFKA_VERSION} controller"
    print(f"brokers: {load.description}, one heartbeat per broker every {load.heartbeat_interval_ms} ms; "
          f"directories under {base}", flush=True)
    rows: list[Row] = []
    problem = kafka_problem()
    try:
        for kind, name in (("kwire", "kwire"), ("kafka", kafka_name)):
            if kind == "kafka" and problem is not None:
                rows.append(Row(name, error=f"not run: {problem}"))
                continue
            t0 = time.monotonic()
            rows.append(run_side(kind, name, load, base))
            load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"  {name}: {time.monotonic() - t0:.0f} s, load average {load_avg}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{'implementation':<28} {'unfenced s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'hb/s':>8} "
          f"{'CPU-s/1000 hb':>14} {'kill->leaders s':>16} {'expiry->leaders s':>18} {'errors':>7}")
    for row in rows:
        if row.error is not None:
            print(f"{row.implementation:<28} {row.error}")
            continue
        print(f"{row.implementation:<28} {_fmt(row.all_unfenced_s):>10} {_fmt(row.p50, 2):>8} {_fmt(row.p99, 2):>8} {_fmt(row.max_ms, 1):>8} "
              f"{_fmt(row.heartbeats_per_s):>8} {_fmt(row.cpu_s_per_1000, 3):>14} "
              f"{_fmt(row.kill_to_new_leaders_s, 2):>16} {_fmt(row.expiry_to_new_leaders_s, 2):>18} {row.errors:>7}")
    for row in rows:
        if row.redirects:
            print(f"{row.implementation}: the leadership moved during the run; {row.redirects} broker requests went "
                  "to the new active controller")
    kwire, ref = rows[0], rows[1] if len(rows) > 1 else None
    if kwire.error is not None:
        return []
    ok_ref = ref if ref is not None and ref.error is None else None
    results = []
    for what, unit, kv, rv, higher in (
        ("every broker registered and unfenced", "s", kwire.all_unfenced_s, ok_ref.all_unfenced_s if ok_ref else None, False),
        ("heartbeat latency p50", "ms", kwire.p50, ok_ref.p50 if ok_ref else None, False),
        ("heartbeat latency p99", "ms", kwire.p99, ok_ref.p99 if ok_ref else None, False),
        ("controller CPU-s per 1000 heartbeats (3 controllers)", "s", kwire.cpu_s_per_1000,
         ok_ref.cpu_s_per_1000 if ok_ref else None, False),
        (f"broker kill to new leaders of its {KILL_PARTITIONS} partitions", "s", kwire.kill_to_new_leaders_s,
         ok_ref.kill_to_new_leaders_s if ok_ref else None, False),
        (f"session expiry to new leaders of its {KILL_PARTITIONS} partitions", "s", kwire.expiry_to_new_leaders_s,
         ok_ref.expiry_to_new_leaders_s if ok_ref else None, False),
    ):
        if kv is None:
            continue
        results.append(Result(
            section=SECTION, what=what, unit=unit, kwire=float(kv), reference=None if rv is None else float(rv),
            reference_name=kafka_name, conditions=load.description, higher_is_better=higher,
        ))
    return results
