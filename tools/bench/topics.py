"""Topics section: one admin client creates topics of 3 partitions and replication factor 3, one
CreateTopics request at a time, against a 3-node kwire controller quorum and a 3-node Kafka
controller quorum of the newest pinned release, side by side.

Each side is three controller processes, a static quorum (``controller.quorum.voters``), each
formatted at its own default metadata.version (``tools.bench.brokers.start_quorum``), and three
simulated brokers (``tools.bench.brokers.simulated_broker``, one connection each to the active
controller) registered, unfenced and heartbeating every 2 s for the whole run, so that
placement has three usable brokers. The admin client (this process, one connection to the
active controller) then sends CreateTopics v7 for ``bench-topic-<n>``, waits for the answer
(the controller answers once the topic's records are committed by a majority), and sends the
next.

Measured: the wall time from the first request sent to the last answer read, the request
latency (p50/p99), and the three controller processes' CPU seconds (utime + stime, with reaped
children's, ``/proc``; ``quorum.cpu_seconds``) over the creations, per hundred topics. Every
answer must be NONE; a side whose answers carry errors says so in its row.

``--quick``: 20 topics (a smoke run); full: 1,000 topics.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tools.bench.brokers import (
    FIRST_BROKER_ID,
    KAFKA_VERSION,
    START_TIMEOUT_S,
    Window,
    active_controller_port,
    simulated_broker,
    start_quorum,
    wait_finalized,
)
from tools.bench.core import Result
from tools.bench.quorum import cpu_seconds
from tools.local_cluster import stop_processes

SECTION = "topics"
BROKERS = 3
PARTITIONS = 3
REPLICATION_FACTOR = 3


@dataclass(frozen=True, slots=True)
class Load:
    topics: int
    description: str


FULL = Load(1000, "3-node quorums, 1,000 topics of 3 partitions, replication factor 3, one request each, 3 simulated brokers")
QUICK = Load(20, "quick: 3-node quorums, 20 topics of 3 partitions, replication factor 3, 3 simulated brokers")
NODES = 3


@dataclass(slots=True)
class Row:
    """One controller's figures; ``error`` when the run gave none."""

    implementation: str
    wall_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    cpu_s_per_100: float | None = None
    errors: int = 0
    error: str | None = None


async def _create(ports: list[int], pids: list[int], load: Load) -> Row | str:
    import trio

    from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
    from server.net.client import open_connection

    port = await active_controller_port(ports)
    finalized = await wait_finalized(port)
    ready = 0

    def unfenced() -> None:
        nonlocal ready
        ready += 1

    forever = Window(float("inf"), float("inf"))
    rng = random.Random(7)
    async with trio.open_nursery() as nursery:
        for i in range(BROKERS):
            # with the quorum's ports a broker follows the leadership if it moves (as in the
            # brokers section), rather than asking a former leader for ever
            nursery.start_soon(partial(simulated_broker, port, FIRST_BROKER_ID + i, finalized, forever, rng, unfenced,
                                       ports=ports))
        with trio.move_on_after(START_TIMEOUT_S):
            while ready < BROKERS:
                await trio.sleep(0.05)
        if ready < BROKERS:
            nursery.cancel_scope.cancel()
            return f"only {ready} of {BROKERS} brokers were unfenced within {START_TIMEOUT_S:.0f} s"
        latencies: list[float] = []
        errors = 0
        async with await open_connection("127.0.0.1", port, "bench-admin", request_timeout_ms=60_000) as admin:
            cpu_before = cpu_seconds(pids)
            started = time.monotonic()
            for n in range(load.topics):
                request = CreateTopicsRequest(
                    topics=[CreatableTopic(
                        name=f"bench-topic-{n}", num_partitions=PARTITIONS, replication_factor=REPLICATION_FACTOR
                    )],
                    timeout_ms=60_000,
                )
                sent = time.monotonic()
                answer = await admin.request(request, 7)
                latencies.append((time.monotonic() - sent) * 1000)
                errors += sum(1 for topic in answer.topics if topic.error_code != 0)
            wall_s = time.monotonic() - started
            cpu_after = cpu_seconds(pids)
        nursery.cancel_scope.cancel()
    latencies.sort()

    def rank(q: float) -> float:
        return latencies[min(len(latencies) - 1, max(0, round(q * len(latencies)) - 1))]

    return Row(
        implementation="",
        wall_s=wall_s,
        p50_ms=rank(0.50),
        p99_ms=rank(0.99),
        cpu_s_per_100=(cpu_after - cpu_before) / load.topics * 100,
        errors=errors,
    )


def run_side(kind: str, name: str, load: Load, base: Path, nodes: int = NODES) -> Row:
    """One side's run (``kind`` "kwire" or "kafka", a quorum of ``nodes`` controllers) under
    ``base``; a Row with ``error`` set when it gave no figures. The controller processes are
    stopped in every case."""
    import trio

    root = base / kind
    root.mkdir(parents=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs, ports = start_quorum(kind, root, nodes)
        outcome = trio.run(_create, ports, [proc.pid for proc in procs], load)
        if isinstance(outcome, str):
            return Row(name, error=outcome)
        outcome.implementation = name
        return outcome
    except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
        return Row(name, error=f"{type(exc).__name__}: {exc}")
    finally:
        stop_processes(procs, timeout_s=30)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def run(args: Any) -> list[Result]:
    from tools.bench.quorum import kafka_problem

    load = QUICK if getattr(args, "quick", False) else FULL
    base_dir = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base_dir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="kwire-bench-topics-", dir=base_dir))
    kafka_name = f"Kafka {KAFKA_VERSION} quorum"
    print(f"topics: {load.description}; directories under {base}", flush=True)
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
    print(f"{'implementation':<28} {'wall s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU-s/100 topics':>17} {'errors':>7}")
    for row in rows:
        if row.error is not None:
            print(f"{row.implementation:<28} {row.error}")
            continue
        print(f"{row.implementation:<28} {_fmt(row.wall_s):>8} {_fmt(row.p50_ms, 2):>8} {_fmt(row.p99_ms, 2):>8} "
              f"{_fmt(row.cpu_s_per_100, 3):>17} {row.errors:>7}")
    kwire, ref = rows[0], rows[1] if len(rows) > 1 else None
    if kwire.error is not None:
        return []
    ok_ref = ref if ref is not None and ref.error is None else None
    results = []
    for what, unit, kv, rv in (
        (f"{load.topics} topics created", "s", kwire.wall_s, ok_ref.wall_s if ok_ref else None),
        ("CreateTopics latency p50", "ms", kwire.p50_ms, ok_ref.p50_ms if ok_ref else None),
        ("CreateTopics latency p99", "ms", kwire.p99_ms, ok_ref.p99_ms if ok_ref else None),
        ("quorum CPU-s per 100 topics", "s", kwire.cpu_s_per_100, ok_ref.cpu_s_per_100 if ok_ref else None),
    ):
        if kv is None:
            continue
        results.append(Result(
            section=SECTION, what=what, unit=unit, kwire=float(kv), reference=None if rv is None else float(rv),
            reference_name=kafka_name, conditions=load.description, higher_is_better=False,
        ))
    return results
