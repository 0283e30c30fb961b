"""Scale section: a controller at 10^4, 10^5 and 10^6 partitions. Two parts: the image in one
process (below), and 3-node quorums of kwire and of stock Kafka side by side
(``tools.bench.scale_quorum``: registration storm, creation, memory, snapshot, controlled
shutdown, zonal outage, failover, restart).

Each point is ``N`` partitions of replication factor 3 in topics of 2,000 partitions, placed by
kwire's ``StripedReplicaPlacer`` over ``B`` registered, unfenced brokers of one log directory
each (10^4 on 30, 10^5 on 300, 10^6 on 1,000 brokers). For each point a fresh Python process
(so that its memory is the point's alone) replays the records a log holds for it, as a standby
controller does, and measures:

* replay: the records (RegisterBrokerRecords, then each TopicRecord and its PartitionRecords)
  replayed from their framed values, per second;
* image bytes a partition: resident memory after the replay less resident memory before the
  first TopicRecord, over N (the image with its broker indexes);
* snapshot: the view taken on the event loop (``ControlManagers.snapshot_view``, ms), the
  ``.checkpoint`` built from it off the event loop (s), its size;
* load: a standby starting again from the snapshot's bytes (``ControlManagers.reset`` over
  its data records, s);
* fencing: the PartitionChangeRecords one broker's fencing writes, computed
  (``BrokerPartitionEffects.broker_removed``: the broker-index lookup and one change per
  partition whose ISR holds it), ms;
* peak resident memory of the process.

The snapshot is written as a ``.checkpoint`` file, and stock Kafka's ``kafka-metadata-shell
--snapshot FILE ls /image/topics/byName`` (the newest pinned release's, or its tools stand-in,
with a 4 GiB heap, in one interactive session that waits for the whole image: its one-command
mode can answer from an empty image) must list every topic of it. Then a one-node controller
of each side is started on that snapshot (:func:`start_on_snapshot`: formatted, the snapshot
beside its empty log): the seconds from its start until it answers CreateTopics of the
snapshot's first and last topics TOPIC_ALREADY_EXISTS, JVM or interpreter start included.
``--quick``: the 10^4 point only.

``KWIRE_SCALE_QUORUM=0`` runs the image part alone; ``KWIRE_SCALE_POINTS`` (partition counts,
comma-separated, e.g. ``100000``) runs only those of the points, and ``KWIRE_SCALE_SIDES``
(``kwire``, ``kafka``, or both, the default) only those quorums.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.bench.core import Result
from tools.bench.scale_quorum import PARTITIONS_PER_REQUEST, QuorumRow, rss_bytes, run_side

SECTION = "scale"
PARTITIONS_PER_TOPIC = 2000
REPLICATION_FACTOR = 3
POINTS = ((10_000, 30), (100_000, 300), (1_000_000, 1_000))
QUICK_POINTS = ((10_000, 30),)
SHELL_HEAP = "-Xmx4g"
SHELL_TIMEOUT_S = 600.0


@dataclass(slots=True)
class Point:
    """One point's figures (kwire's from :func:`measure_point`, Kafka's shell load beside)."""

    partitions: int
    brokers: int
    replay_records_per_s: float
    image_bytes_per_partition: float
    view_ms: float
    build_s: float
    snapshot_bytes: int
    load_s: float
    fence_ms: float
    fence_records: int
    peak_rss_mib: float
    snapshot_path: str
    topics: int
    kafka_read: str | None = None
    """What stock metadata-shell made of the snapshot: "ok", or why not."""
    started_s: dict[str, float | str] = field(default_factory=dict)
    """By side ("kwire", "kafka"): the seconds a controller started on the snapshot took to
    serve its topics (:func:`start_on_snapshot`), or why it did not."""


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_point(partitions: int, brokers: int, directory: Path) -> dict[str, Any]:
    """One point, measured in this process (module docstring); the snapshot is written under
    ``directory``. Returns the figures as :class:`Point`'s fields."""
    import random

    from kwire.uuid import Uuid
    from messages.generated.feature_level_record import FeatureLevelRecord
    from messages.generated.partition_record import PartitionRecord
    from messages.generated.register_broker_record import (
        BrokerEndpoint,
        BrokerFeature,
        RegisterBrokerRecord,
    )
    from messages.generated.topic_record import TopicRecord
    from messages.metadata import encode_record
    from server.controller.controller import ControlManagers
    from server.controller.partition_effects import BrokerPartitionEffects, TopicConfigLayers
    from server.controller.placement import UsableBroker, place_replicas
    from server.controller.snapshots import image_snapshot
    from server.raft.types import OffsetAndEpoch
    from storage.snapshot_format import SnapshotId

    level = 21  # metadata.version 3.9-IV0: directories in partition records
    feature = FeatureLevelRecord(name="metadata.version", feature_level=level)
    controller = ControlManagers(bootstrap=[(feature, 0)], cluster_id="scale-bench")
    offset = 0

    def replay(value: bytes) -> None:
        nonlocal offset
        controller.replay(value, offset)
        offset += 1

    replay(encode_record(feature, 0))
    broker_dirs = [Uuid.from_longs(0x5CA1E, b) for b in range(brokers)]
    started = time.perf_counter()
    replayed = 0
    for b in range(brokers):
        replay(encode_record(RegisterBrokerRecord(
            broker_id=b, incarnation_id=Uuid.from_longs(b, 1), broker_epoch=100 + b,
            end_points=[BrokerEndpoint(name="PLAINTEXT", host=f"broker-{b}", port=9092, security_protocol=0)],
            features=[BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=level)],
            rack=None, fenced=False, in_controlled_shutdown=False, log_dirs=[broker_dirs[b]],
        ), 3))
        replayed += 1
    replay_s = time.perf_counter() - started
    gc.collect()
    rss_before = rss_bytes()
    rng = random.Random(partitions)
    usable = [UsableBroker(b, None, False) for b in range(brokers)]
    topics = -(-partitions // PARTITIONS_PER_TOPIC)
    for t in range(topics):
        count = min(PARTITIONS_PER_TOPIC, partitions - t * PARTITIONS_PER_TOPIC)
        topic_id = Uuid.from_longs(0x70, t + 1)
        values = [encode_record(TopicRecord(name=f"scale-{t}", topic_id=topic_id), 0)]
        for index, replicas in enumerate(place_replicas(count, REPLICATION_FACTOR, usable, rng)):
            values.append(encode_record(PartitionRecord(
                partition_id=index, topic_id=topic_id, replicas=replicas, isr=replicas, leader=replicas[0],
                leader_epoch=0, partition_epoch=0, directories=[broker_dirs[b] for b in replicas],
            ), 1))
        started = time.perf_counter()
        for value in values:
            replay(value)
        replay_s += time.perf_counter() - started
        replayed += len(values)
    gc.collect()
    image_bytes = rss_bytes() - rss_before

    started = time.perf_counter()
    view = controller.snapshot_view()
    view_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    snapshot_id = OffsetAndEpoch(offset, 1)
    now_ms = time.time_ns() // 1_000_000
    data = image_snapshot(snapshot_id, view, last_contained_log_timestamp=now_ms, append_time_ms=now_ms, kraft_version=0,
                          voters=None)  # type: ignore[arg-type]  # kraft.version 0 writes no voters
    build_s = time.perf_counter() - started
    partition_dir = directory / "__cluster_metadata-0"
    partition_dir.mkdir(parents=True, exist_ok=True)
    path = partition_dir / f"{SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem}.checkpoint"
    path.write_bytes(data)

    fence_ms, fence_records = 0.0, 0
    if topics:
        image = controller.replication
        effects = BrokerPartitionEffects(
            image, controller.cluster, TopicConfigLayers(image, 3000, {}), metadata_version=level, elr_enabled=False,
        )
        started = time.perf_counter()
        fence_records = len(effects.broker_removed(brokers // 2))
        fence_ms = (time.perf_counter() - started) * 1000

    loaded = measure_load(path)
    load_s = loaded["load_s"]
    if loaded["partitions"] != partitions:
        raise RuntimeError(f"the loaded snapshot holds {loaded['partitions']} partitions, not {partitions}")
    return {
        "partitions": partitions, "brokers": brokers,
        "replay_records_per_s": replayed / replay_s if replay_s else 0.0,
        "image_bytes_per_partition": image_bytes / partitions if partitions else 0.0,
        "view_ms": view_ms, "build_s": build_s, "snapshot_bytes": len(data), "load_s": load_s,
        "fence_ms": fence_ms, "fence_records": fence_records, "peak_rss_mib": _peak_rss_mib(),
        "snapshot_path": str(path), "topics": topics,
    }


def measure_load(snapshot: Path) -> dict[str, Any]:
    """Load the ``.checkpoint`` file ``snapshot`` (written by either side) into a fresh
    controller, in this process: the seconds it took, and the partitions and topics the image
    then holds."""
    from server.controller.controller import ControlManagers
    from storage.snapshot_format import read_snapshot_batches

    data = snapshot.read_bytes()
    controller = ControlManagers(bootstrap=[], cluster_id="scale-bench")
    started = time.perf_counter()
    controller.reset(read_snapshot_batches(data).iter_data_records())
    load_s = time.perf_counter() - started
    return {"load_s": load_s, "partitions": controller.replication.partition_count,
            "topics": len(controller.replication.topics)}


def _load(snapshot: str) -> dict[str, Any]:
    """:func:`measure_load` in a process of its own."""
    out = subprocess.run([sys.executable, "-m", "tools.bench.scale", "--load", snapshot],
                         capture_output=True, text=True, check=False, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"loading {snapshot} failed: {out.stderr[-2000:]}")
    loaded: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def _point(partitions: int, brokers: int, directory: Path) -> Point:
    """:func:`measure_point` in a process of its own."""
    out = subprocess.run(
        [sys.executable, "-m", "tools.bench.scale", "--point", str(partitions), str(brokers), str(directory)],
        capture_output=True, text=True, check=False, timeout=3600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the {partitions}-partition point failed: {out.stderr.strip()[-2000:]}")
    return Point(**json.loads(out.stdout.strip().splitlines()[-1]))


def _shell_reads(snapshot: str, topics: int) -> str:
    """"ok" when stock metadata-shell lists every one of the ``topics`` topics of
    ``snapshot`` (``tools.stock_metadata_shell.metadata_shell_session``), else what it listed."""
    from tools.bench.brokers import KAFKA_VERSION
    from tools.stock_metadata_shell import metadata_shell_session

    out = metadata_shell_session(KAFKA_VERSION, snapshot, ["ls /image/topics/byName"], jvm_args=[SHELL_HEAP],
                                 timeout=SHELL_TIMEOUT_S)
    listed = {name for name in out[0].split() if name.startswith("scale-")}
    return "ok" if len(listed) == topics else f"listed {len(listed)} of {topics} topics"


def start_on_snapshot(kind: str, snapshot: Path, topics: int, root: Path, *, timeout_s: float = 900.0) -> float:
    """Start a controller of ``kind`` ("kwire", or "kafka": ``kafka.Kafka`` of the newest
    pinned release with the quorum section's heap) as a one-node quorum on ``snapshot``: its
    directory is formatted, the snapshot put in it beside the empty log (both sides then
    truncate the log to the snapshot, ``KafkaMetadataLog.truncateToLatestSnapshot``), and the
    node started. Returns the seconds from the start until CreateTopics of the snapshot's
    first and last topics (``scale-0``, ``scale-{topics - 1}``) both answer
    TOPIC_ALREADY_EXISTS: the controller is active on the whole image. Raises RuntimeError
    when another answer comes (the snapshot was not loaded), the process exits, or
    ``timeout_s`` passes."""
    import trio

    from tools.bench.brokers import _properties, format_node, start_node
    from tools.bench.scale_quorum import KAFKA_HEAP, NOT_CONTROLLER, TOPIC_ALREADY_EXISTS, _create
    from tools.local_cluster import free_ports, stop_processes

    root.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    data = root / f"{kind}-data"
    props = _properties(root / f"{kind}.properties", data, port, node_id=1, voters=f"1@127.0.0.1:{port}")
    format_node(kind, props)
    partition_dir = data / "__cluster_metadata-0"  # kwire's format leaves it to the first start
    partition_dir.mkdir(exist_ok=True)
    shutil.copyfile(snapshot, partition_dir / snapshot.name)
    started = time.monotonic()
    proc = start_node(kind, props, root / f"{kind}.out", root / f"{kind}-logs",
                      jvm_args=[KAFKA_HEAP] if kind == "kafka" else [])
    names = ["scale-0", f"scale-{topics - 1}"]

    async def serving() -> None:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} exited with {proc.returncode} (see {root / (kind + '.out')})")
            try:
                codes = [await _create(port, name, 1) for name in names]
            except Exception:  # noqa: BLE001 - not listening or not active yet: asked again
                codes = []
            if codes and all(code == TOPIC_ALREADY_EXISTS for code in codes):
                return
            if set(codes) - {TOPIC_ALREADY_EXISTS, NOT_CONTROLLER}:
                raise RuntimeError(f"{kind} answered CreateTopics of {names} with {codes}: it did not load the snapshot")
            await trio.sleep(0.2)

    try:
        trio.run(_within, serving, timeout_s)
        return time.monotonic() - started
    finally:
        stop_processes([proc], timeout_s=30)


async def _within(task: Any, timeout_s: float) -> None:
    import trio

    with trio.fail_after(timeout_s):
        await task()


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def run(args: Any) -> list[Result]:
    from tools.bench.brokers import KAFKA_VERSION
    from tools.bench.quorum import kafka_problem
    from tools.stock_kafka import tool_release

    points: tuple[tuple[int, int], ...] = QUICK_POINTS if getattr(args, "quick", False) else POINTS
    chosen = os.environ.get("KWIRE_SCALE_POINTS", "")
    if chosen:
        wanted = {int(p.replace("_", "")) for p in chosen.split(",")}
        points = tuple(p for p in POINTS if p[0] in wanted)
        if not points:
            raise SystemExit(f"KWIRE_SCALE_POINTS={chosen}: none of {[p for p, _ in POINTS]}")
    base_dir = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base_dir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="kwire-bench-scale-", dir=base_dir))
    problem = kafka_problem()
    shell = f"kafka-metadata-shell {tool_release(KAFKA_VERSION, 'metadata-shell')}" if problem is None else None
    rows: list[Point] = []
    try:
        for partitions, brokers in points:
            t0 = time.monotonic()
            point = _point(partitions, brokers, base / str(partitions))
            if shell is None:
                point.kafka_read = f"not run: {problem}"
            else:
                try:
                    point.kafka_read = _shell_reads(point.snapshot_path, point.topics)
                except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
                    point.kafka_read = f"{type(exc).__name__}: {exc}"
            for kind in ("kwire", "kafka"):
                if kind == "kafka" and problem is not None:
                    point.started_s[kind] = f"not run: {problem}"
                    continue
                try:
                    point.started_s[kind] = start_on_snapshot(kind, Path(point.snapshot_path), point.topics,
                                                              base / f"{partitions}-started")
                except Exception as exc:  # noqa: BLE001 - a failed start is a figure that says why
                    point.started_s[kind] = f"{type(exc).__name__}: {exc}"
                print(f"    a {kind} controller started on the snapshot: {point.started_s[kind]}", flush=True)
            Path(point.snapshot_path).unlink(missing_ok=True)
            rows.append(point)
            load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"  {partitions:,} partitions on {brokers:,} brokers: {time.monotonic() - t0:.0f} s, "
                  f"load average {load_avg}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{'partitions':>10} {'brokers':>7} {'replay rec/s':>12} {'B/partition':>11} {'view ms':>8} "
          f"{'build s':>8} {'snapshot MiB':>12} {'load s':>7} {'fence ms':>9} {'peak MiB':>9}  {shell or 'metadata-shell'}")
    for p in rows:
        print(f"{p.partitions:>10,} {p.brokers:>7,} {p.replay_records_per_s:>12,.0f} "
              f"{p.image_bytes_per_partition:>11,.0f} {p.view_ms:>8,.0f} {p.build_s:>8,.1f} "
              f"{p.snapshot_bytes / 2**20:>12,.1f} {p.load_s:>7,.1f} "
              f"{p.fence_ms:>9,.1f} {p.peak_rss_mib:>9,.0f}  {p.kafka_read}")
    results = []
    for p in rows:
        conditions = (f"{p.partitions:,} partitions, RF {REPLICATION_FACTOR}, {p.brokers:,} brokers, "
                      f"topics of {PARTITIONS_PER_TOPIC:,}")
        mine, theirs = p.started_s.get("kwire"), p.started_s.get("kafka")
        if isinstance(mine, float):
            results.append(Result(
                section=SECTION, what="controller started on kwire's snapshot, to serving its topics", unit="s",
                kwire=mine, reference=theirs if isinstance(theirs, float) else None,
                reference_name=f"Kafka {KAFKA_VERSION}",
                conditions=f"{conditions}; one-node quorum" + ("" if isinstance(theirs, float) else f"; Kafka: {theirs}"),
                higher_is_better=False,
            ))
        for what, unit, value in (
            ("snapshot load", "s", p.load_s),
            ("snapshot build (off the event loop)", "s", p.build_s),
            ("snapshot view (on the event loop)", "ms", p.view_ms),
            ("image memory per partition", "B", p.image_bytes_per_partition),
            ("one broker's fencing computed", "ms", p.fence_ms),
        ):
            results.append(Result(
                section=SECTION, what=what, unit=unit, kwire=float(value), reference=None,
                reference_name=f"Kafka {KAFKA_VERSION}", conditions=f"{conditions}; metadata-shell: {p.kafka_read}",
                higher_is_better=False,
            ))
    if os.environ.get("KWIRE_SCALE_QUORUM", "1") != "0":
        results += _quorums(points, problem)
    return results


def _quorums(points: tuple[tuple[int, int], ...], problem: str | None) -> list[Result]:
    """The quorum part (``tools.bench.scale_quorum``) at every point, both sides."""
    from tools.bench.brokers import KAFKA_VERSION

    base_dir = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    base = Path(tempfile.mkdtemp(prefix="kwire-bench-scale-quorum-", dir=base_dir))
    kafka_name = f"Kafka {KAFKA_VERSION}"
    pairs: list[tuple[QuorumRow, QuorumRow]] = []
    chosen_sides = os.environ.get("KWIRE_SCALE_SIDES", "kwire,kafka")
    wanted_sides = {side.strip() for side in chosen_sides.split(",")}
    try:
        for partitions, brokers in points:
            sides = []
            for kind, name in (("kwire", "kwire"), ("kafka", kafka_name)):
                t0 = time.monotonic()
                if kind == "kafka" and problem is not None:
                    sides.append(QuorumRow(name, partitions, brokers, error=f"not run: {problem}"))
                    continue
                if kind not in wanted_sides:
                    sides.append(QuorumRow(name, partitions, brokers, error=f"not run: KWIRE_SCALE_SIDES={chosen_sides}"))
                    continue
                sides.append(run_side(kind, name, partitions, brokers, base))
                load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"  quorum, {name}, {partitions:,} partitions on {brokers:,} brokers: "
                      f"{time.monotonic() - t0:.0f} s, load average {load_avg}", flush=True)
                print(f"    {sides[-1]}", flush=True)  # every figure at once, should a later point not end
            kafka_side = sides[1]
            if kafka_side.snapshot_path is not None:
                try:
                    loaded = _load(kafka_side.snapshot_path)
                    kafka_side.foreign_load_s = loaded["load_s"]
                    print(f"    kwire loaded {kafka_name}'s snapshot after the creation in {loaded['load_s']:.1f} s: "
                          f"{loaded['partitions']:,} partitions, {loaded['topics']:,} topics", flush=True)
                except Exception as exc:  # noqa: BLE001 - a failed load is a line that says why
                    print(f"    kwire could not load {kafka_name}'s snapshot: {exc}", flush=True)
            pairs.append((sides[0], sides[1]))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figures = (
        ("storm_s", "registration storm: every broker unfenced", "s"),
        ("create_s", "creation of every partition", "s"),
        ("create_p50_ms", f"CreateTopics of {PARTITIONS_PER_REQUEST:,} partitions p50", "ms"),
        ("create_max_ms", f"CreateTopics of {PARTITIONS_PER_REQUEST:,} partitions max", "ms"),
        ("create_cpu_s", "quorum CPU-s for the creation", "s"),
        ("snapshot_bytes", "snapshot size", "B"),
        ("shutdown_s", "controlled shutdown: leaderships moved", "s"),
        ("kill_s", "broker kill: every partition it led has another leader (median)", "s"),
        ("kill_past_expiry_s", "broker kill, from its session's end (median)", "s"),
        ("outage_s", "zonal outage (a third of the brokers): all fenced", "s"),
        ("failover_s", "kill -9 of the active controller to a CreateTopics answered", "s"),
        ("restart_s", "restart of the killed controller to caught up", "s"),
        ("retries", "CreateTopics asked again after NOT_CONTROLLER", "requests"),
    )
    results = []
    print(f"{'figure':<62} " + " ".join(f"{f'{p:,}':>21}" for p, _ in points))
    print(f"{'':<62} " + " ".join(f"{'kwire / Kafka':>21}" for _ in points))
    for attr, what, unit in figures:
        cells = [f"{_fmt(getattr(k, attr), 2):>10} /{_fmt(getattr(r, attr), 2):>10}" for k, r in pairs]
        print(f"{what + ' (' + unit + ')':<62} " + " ".join(cells))
    for label, attr in (("RSS per controller (MiB)", "rss_mib"), ("Kafka heap in use (MiB)", "heap_used_mib")):
        cells = [f"{'/'.join(f'{x:.0f}' for x in getattr(k, attr)) or '-':>10} /"
                 f"{'/'.join(f'{x:.0f}' for x in getattr(r, attr)) or '-':>10}" for k, r in pairs]
        print(f"{label:<62} " + " ".join(cells))
    for kwire, ref in pairs:
        for row in (kwire, ref):
            if row.error is not None:
                print(f"  {row.implementation} at {row.partitions:,}: {row.error}")
        conditions = f"3-node quorums, {kwire.partitions:,} partitions, RF 3, {kwire.brokers:,} brokers"
        for attr, what, unit in figures:
            value, reference = getattr(kwire, attr), getattr(ref, attr)
            if value is None:
                continue
            results.append(Result(
                section=SECTION, what=what, unit=unit, kwire=float(value),
                reference=None if reference is None else float(reference), reference_name=kafka_name,
                conditions=conditions, higher_is_better=False,
            ))
        if kwire.rss_mib and kwire.partitions:
            results.append(Result(
                section=SECTION, what="largest controller RSS", unit="MiB", kwire=max(kwire.rss_mib),
                reference=max(ref.rss_mib) if ref.rss_mib else None, reference_name=kafka_name,
                conditions=conditions, higher_is_better=False,
            ))
        if ref.foreign_load_s is not None:
            results.append(Result(
                section=SECTION, what=f"{kafka_name}'s snapshot loaded by kwire", unit="s", kwire=ref.foreign_load_s,
                reference=None, reference_name=kafka_name, conditions=conditions, higher_is_better=False,
            ))
    return results


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--point":
        print(json.dumps(measure_point(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))))
    elif len(sys.argv) == 3 and sys.argv[1] == "--load":
        print(json.dumps(measure_load(Path(sys.argv[2]))))
    else:
        sys.exit("usage: python -m tools.bench.scale --point PARTITIONS BROKERS DIR | --load CHECKPOINT")
