"""Quorum section: a 3-node quorum under Kafka TestRaftServer's workload, kwire and Kafka side by
side.

The workload is that of ``kafka.tools.TestRaftServer``: the leader writes 20,000 records/s of
256 bytes (the figures its Oct 2024 source and the pinned 3.9.2 jar hard-code; 4.4.0's honours
``--throughput``/``--record-size``, and is given those values) and measures each record's commit
latency to the commit callback: Kafka's from the append call, kwire's from the record's due time
on the load's schedule (``tools.raft_server_load``; never less than from its append, and its
generator wakes every fifth of the linger, 1-5 ms). Each side runs as three processes on free
loopback ports, once per ``controller.quorum.append.linger.ms`` in :data:`LINGERS_MS`:

* kwire: three ``kwire test-raft-server --json --record-type no-op`` nodes
  (:class:`tools.local_cluster.DevCluster`, a formatted dynamic quorum; :data:`RECORD_TYPE` says
  why NoOpRecords) reporting every ``window`` seconds. The leader's first report
  covers start-up, election and warm-up; its second report is the measured window: exact
  p50/p75/p99/p999 (nearest rank over every record committed in the window), committed
  records/s, and the records the load generator skipped because a second of load was still
  uncommitted (kwire drops load it cannot keep up with, so committed records/s is what it
  sustains).
* Kafka: three ``kafka.tools.TestRaftServer`` JVMs of :data:`KAFKA_VERSION` (static quorum,
  ``controller.quorum.voters``; heap as Kafka's ``test-kraft-server-start.sh``, 1 GiB). Their
  only output is the leader's line every ~5 s, ``Throughput (bytes/second): %.2f, Latency (ms):
  %.1f p75 %.1f p99 %.1f p999``: there is no p50, and the table says so. Its figures are Kafka
  metrics with the default ``MetricConfig`` (two 30 s samples, the first starting at the first
  commit), so they are not per-interval: the rate is a true rate only once 30 s of commits are
  behind it (before that it is divided by the elapsed time plus 30 s), and the percentiles cover
  the current and the previous 30 s sample. Full runs therefore take the first line printed at
  least 62 s after the leader's first line: it covers [first commit + 30 s, that line], ~32-38 s
  after a 30 s warm-up. The histogram spans 0-250 ms (``Percentiles(1000, 250.0, CONSTANT)``):
  a value of 249 or more means "at or beyond the top". Kafka's throttler never skips load: it
  sends late records as fast as it can, so its committed rate can exceed the target after a
  stall.

CPU: utime + stime, with those of reaped children (``/proc/<pid>/stat``, in ``SC_CLK_TCK``
ticks; :func:`cpu_seconds`), of all three processes over
the measured window, divided by the records committed in it, times one million. For kwire the
window is between the leader's two reports (its record count); for Kafka between two of its lines
one ``window`` apart (records = Kafka's rate x the window's length).

``--throughput [RATES]`` runs the same measurement at each offered load of RATES (default
:data:`CURVE`) and at each linger, both sides, and names each side's saturation point: the highest
load up to which it kept up at every load (no skipped record and at least :data:`KEEP_UP_SHARE`
of the load committed; Kafka never skips, so for it only the committed rate counts). Without the
flag the single load is TestRaftServer's :data:`THROUGHPUT`.

After the loads, the failover rounds of :mod:`tools.bench.failover` (SIGTERM and SIGKILL of the
leader, time to the new leader's first commit, both sides with the same timeouts) run unless
``--no-failover`` is given.

``--tls`` runs every load and linger twice, on PLAINTEXT listeners and on SSL ones (both sides'
controller listeners and the nodes' connections to each other: a throw-away authority's
certificates, :mod:`tools.pki`, as PEM key and trust stores, Kafka's ``ssl.*`` keys), so that
each side's cost of TLS on the commit path is measured in the same run as the other's.

``--quick`` (smoke use): 5 s windows for kwire; Kafka's line is the first one 32 s after its first
line (the earliest at which its rate is a rate), so its latencies include the warm-up.

The nodes' directories live under ``KWIRE_BENCH_DIR`` (default ``./build``: the disk, not tmpfs,
since both sides fsync the leader's log) and are removed afterwards; every process started is
stopped, also on errors. Kafka runs through :mod:`tools.stock_kafka` (the jars ``make
compat-jars`` fetched; an installed copy finds them through ``KWIRE_COMPAT_DIR``). When Java or
the jars are missing, Kafka's rows say why and kwire's are still printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tools.bench import failover
from tools.bench.core import Result, Tail, tail_text

# re-exported: the section's rows and table live in tools.bench.quorum_table
from tools.bench.quorum_table import (  # noqa: F401
    FULL,
    KAFKA_SAMPLE_S,
    KAFKA_VERSION,
    KEEP_UP_SHARE,
    LINGERS_MS,
    NODES,
    QUICK,
    RECORD_SIZE,
    SECTION,
    THROUGHPUT,
    Row,
    Timing,
    failover_results,
    format_rows,
    keeps_up,
    saturation,
    to_results,
)

RECORD_TYPE = "no-op"
"""kwire's workload records (``kwire test-raft-server --record-type``): NoOpRecords carrying the
payload, which no controller replays -- TestRaftServer's records are opaque bytes that only its
counting listener sees, so both sides time the commit path alone."""
LINGER_KEY = "controller.quorum.append.linger.ms"
CURVE = "1000,5000,10000,20000,40000,80000,160000"
"""``--throughput`` without a value: the load curve's offered loads, records/s, from a twentieth
to eight times TestRaftServer's workload. On the 2-core bench machine neither side keeps up with
the last in every run; the curve's figures are in ``BENCHMARKS.md`` and ``--report DIR`` draws
them.

A saturated kwire run is bimodal: once the followers fall behind they fetch whole 8 MiB reads
(``MAX_FETCH_SIZE_BYTES``), each written, fsynced and read back for the controller, and stay
behind; kwire's commit latency then nears a second and its generator skips the records it could
not append (one second of load at most waits uncommitted). CPU is counted with the nodes'
reaped children (:func:`cpu_seconds`): a node crosses the 20 MiB snapshot trigger twice a second
at 160,000 records/s, and images of 2,000 records and more are built in forked processes
(``server.node.snapshot_files.FORK_MIN_IMAGE_RECORDS``)."""
FAILOVER_LINGER_MS = 25  # Kafka's default controller.quorum.append.linger.ms
KAFKA_MAIN = "kafka.tools.TestRaftServer"
KAFKA_HEAP = ("-Xmx1G", "-Xms1G")  # KAFKA_HEAP_OPTS of Kafka's raft/bin/test-kraft-server-start.sh
POLL_S = 0.05

_KAFKA_LINE = re.compile(
    r"Throughput \(bytes/second\): ([0-9.]+), Latency \(ms\): ([0-9.]+) p75 ([0-9.]+) p99 "
    r"([0-9.]+) p999"
)


class QuorumRunError(RuntimeError):
    """One side's run could not produce figures (a node exited, no leader, no report in time)."""


# ---------------------------------------------------------------------------------------------
# helpers


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds the processes ``pids`` and their reaped children used so far: utime + stime +
    cutime + cstime (``/proc/<pid>/stat`` fields 14-17, in ``SC_CLK_TCK`` ticks). The children
    count because a kwire node builds its snapshots in forked processes (``server.node.forked``)
    where Kafka's controller uses a thread of its own process. Raises OSError when a process is
    gone."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
        ticks += sum(map(int, fields[11:15]))
    return ticks / os.sysconf("SC_CLK_TCK")


def parse_kafka_line(line: str) -> tuple[float, float, float, float] | None:
    """``(bytes/s, p75, p99, p999)`` of one TestRaftServer stats line, None for other lines."""
    m = _KAFKA_LINE.search(line)
    if m is None:
        return None
    return float(m[1]), float(m[2]), float(m[3]), float(m[4])


def _bench_dir() -> Path:
    base = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kwire-bench-quorum-", dir=base))


# ---------------------------------------------------------------------------------------------
# kwire


def tls_properties(base: Path) -> dict[str, str]:
    """An SSL controller listener's settings for either side, with certificates of a
    throw-away authority made under ``base`` on first use."""
    from tools.pki import make_pki

    root = base / "pki"
    if not (root / "ca.pem").exists():
        root.mkdir(parents=True, exist_ok=True)
        make_pki(root)
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(root / "server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(root / "ca.pem"),
    }


def run_kwire(linger_ms: int, timing: Timing, base: Path, load: int = THROUGHPUT, listener: str = "PLAINTEXT") -> Row:
    """Three ``kwire test-raft-server`` nodes at ``linger_ms``, the leader offering ``load``
    records/s, on a ``listener`` (PLAINTEXT or SSL) controller listener; figures of the leader's
    second report. Raises QuorumRunError (or DevClusterError) when the run gives no figures."""
    import ssl

    from tools.client_config import PLAINTEXT, ClientSecurity
    from tools.local_cluster import DevCluster

    root = base / f"kwire-{listener}-{load}-linger-{linger_ms}"
    properties = {LINGER_KEY: str(linger_ms)}
    security = PLAINTEXT
    if listener == "SSL":
        properties |= tls_properties(base)
        security = ClientSecurity(None, ssl.create_default_context(cafile=properties["ssl.truststore.location"]))
    cluster = DevCluster.create(
        root, NODES, base_port=None, workload=(load, RECORD_SIZE), record_type=RECORD_TYPE,
        properties=properties, stats_interval_ms=int(timing.window_s * 1000), security=security,
    )
    try:
        cluster.start()
        pids = [n.process.pid for n in cluster.nodes.values() if n.process is not None]
        tails = {i: Tail(n.stdout_path) for i, n in cluster.nodes.items()}
        reports: dict[int, list[tuple[dict[str, Any], float]]] = {i: [] for i in cluster.nodes}
        leaders: set[tuple[int, int]] = set()
        deadline = time.monotonic() + timing.timeout_s
        while True:
            for node_id, tail in tails.items():
                for line in tail.lines():
                    if not line.startswith("{"):
                        continue
                    event = json.loads(line)
                    if event.get("event") == "leader" and event.get("leader_id") is not None:
                        leaders.add((event["leader_id"], event["epoch"]))
                    if event.get("event") == "stats":
                        reports[node_id].append((event, cpu_seconds(pids)))
            done = [i for i, r in reports.items() if len(r) >= 2]
            if done:
                break
            for node in cluster.nodes.values():
                if not node.running:
                    raise QuorumRunError(
                        f"kwire node {node.node_id} exited ({node.process and node.process.returncode}): "
                        f"{tail_text(node.log_path)}")
            if time.monotonic() > deadline:
                raise QuorumRunError(f"kwire: no leader report after {timing.timeout_s:.0f} s")
            time.sleep(POLL_S)
        leader = done[0]
        (first, cpu0), (second, cpu1) = reports[leader][:2]
    finally:
        cluster.stop()
        for node in cluster.nodes.values():  # stop() kills stragglers; make sure of it
            if node.running:
                cluster.kill(node.node_id)
    window = (second["time_ms"] - first["time_ms"]) / 1000
    skipped = int(second["skipped"]) - int(first["skipped"])
    records = int(second["records"])
    lat = second["latency_ms"]
    notes = [f"leader {leader}"]
    if len(leaders) > 1:
        notes.append(f"leaders seen (id, epoch): {sorted(leaders)}")
    if first["epoch"] != second["epoch"]:
        notes.append(f"epoch changed {first['epoch']} -> {second['epoch']} in the window")
    return Row(
        implementation="kwire", linger_ms=linger_ms, load=load, listener=listener,
        p50=lat["p50"], p75=lat["p75"], p99=lat["p99"], p999=lat["p999"],
        records_per_s=float(second["records_per_s"]),
        offered_per_s=load - skipped / window if window > 0 else None,
        skipped=skipped,
        cpu_s_per_million=(cpu1 - cpu0) / records * 1e6 if records else None,
        window_s=window, note="; ".join(notes),
    )


# ---------------------------------------------------------------------------------------------
# Kafka


def kafka_problem(version: str = KAFKA_VERSION) -> str | None:
    """Why Kafka ``version``'s TestRaftServer cannot run here, or None."""
    from tools.stock_kafka import KafkaUnavailable, has_class, java_executable, kafka_jar

    try:
        java_executable()
        kafka_jar(version, "kafka_2.13")
        if not has_class(version, KAFKA_MAIN):
            return f"{KAFKA_MAIN} is not in Kafka {version}'s jars"
    except (KafkaUnavailable, ValueError) as exc:
        return str(exc)
    return None


def kafka_server_properties(node_id: int, port: int, voters: str, data_dir: Path, linger_ms: int,
                            extra: dict[str, str] | None = None) -> str:
    """A TestRaftServer configuration: static quorum ``voters`` (``id@host:port,...``), one
    CONTROLLER listener on ``port``, the log under ``data_dir``; ``extra`` settings last (a key
    there wins over the same key before it)."""
    return "\n".join([
        f"node.id={node_id}",
        "process.roles=controller",
        f"listeners=CONTROLLER://localhost:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
        f"controller.quorum.voters={voters}",
        f"metadata.log.dir={data_dir}",
        f"log.dirs={data_dir}",
        f"{LINGER_KEY}={linger_ms}",
        *(f"{k}={v}" for k, v in (extra or {}).items()),
    ]) + "\n"


def run_kafka(linger_ms: int, timing: Timing, base: Path, load: int = THROUGHPUT, listener: str = "PLAINTEXT",
              version: str = KAFKA_VERSION) -> Row:
    """Three Kafka TestRaftServer JVMs at ``linger_ms``, the leader offering ``load`` records/s,
    on a ``listener`` (PLAINTEXT or SSL) controller listener; figures of the leader's line chosen
    as the module docstring says. Raises QuorumRunError when the run gives no figures."""
    from kwire.uuid import Uuid
    from tools.local_cluster import free_ports
    from tools.stock_kafka import start_kafka_class

    root = base / f"kafka-{listener}-{load}-linger-{linger_ms}"
    extra = tls_properties(base) if listener == "SSL" else None
    ports = free_ports(NODES)
    voters = ",".join(f"{i + 1}@localhost:{p}" for i, p in enumerate(ports))
    procs: list[subprocess.Popen[bytes]] = []
    outs: list[Path] = []
    errs: list[Path] = []
    try:
        for i, port in enumerate(ports):
            node_dir = root / f"node-{i + 1}"
            node_dir.mkdir(parents=True)
            config = node_dir / "server.properties"
            config.write_text(kafka_server_properties(i + 1, port, voters, node_dir / "data", linger_ms, extra))
            outs.append(node_dir / "stdout.log")
            errs.append(node_dir / "stderr.log")
            with outs[-1].open("wb") as out, errs[-1].open("wb") as err:
                procs.append(start_kafka_class(
                    version, KAFKA_MAIN,
                    ["--config", str(config), "--replica-directory-id", str(Uuid.random()),
                     "--throughput", str(load), "--record-size", str(RECORD_SIZE)],
                    jvm_args=KAFKA_HEAP, logs_dir=node_dir, stdout=out.fileno(), stderr=err.fileno(),
                ))
        pids = [p.pid for p in procs]
        tails = [Tail(path) for path in outs]
        leader: int | None = None  # the node that printed last: only a leader records stats
        lines_seen = [0] * NODES
        leaders: list[int] = []
        first_line_t = 0.0
        cpu_mark: tuple[float, float] | None = None  # (time, cpu s) at the window's first line
        chosen: tuple[float, float, tuple[float, float, float, float]] | None = None
        deadline = time.monotonic() + timing.timeout_s + timing.kafka_report_after_s
        while chosen is None:
            now = time.monotonic()
            for i, tail in enumerate(tails):
                for line in tail.lines():
                    figures = parse_kafka_line(line)
                    if figures is None or chosen is not None:
                        continue
                    lines_seen[i] += 1
                    if leader != i + 1:  # a new leader: its figures start afresh
                        leader, first_line_t, cpu_mark = i + 1, now, None
                        leaders.append(leader)
                    since = now - first_line_t
                    if cpu_mark is None and since >= timing.kafka_report_after_s - timing.window_s:
                        cpu_mark = (now, cpu_seconds(pids))
                    elif cpu_mark is not None and since >= timing.kafka_report_after_s:
                        chosen = (now, cpu_seconds(pids), figures)
            for n, proc in enumerate(procs):
                if proc.poll() is not None:
                    raise QuorumRunError(
                        f"Kafka {version} node {n + 1} exited ({proc.returncode}): {tail_text(errs[n])}")
            if chosen is None and time.monotonic() > deadline:
                raise QuorumRunError(
                    f"Kafka {version}: no usable TestRaftServer line after "
                    f"{timing.timeout_s + timing.kafka_report_after_s:.0f} s (stats lines per node "
                    f"{lines_seen}, leaders in order {leaders}; last stderr of node {leader}: "
                    f"{tail_text(errs[(leader or 1) - 1], 600)})")
            if chosen is None:
                time.sleep(POLL_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert cpu_mark is not None
    t_end, cpu_end, (bytes_per_s, p75, p99, p999) = chosen
    window = t_end - cpu_mark[0]
    records_per_s = bytes_per_s / RECORD_SIZE
    records = records_per_s * window
    notes = [f"leader {leader}", "no p50 (TestRaftServer prints p75/p99/p999 only)"]
    if max(p75, p99, p999) >= 249.0:
        notes.append("latency histogram tops out at 250 ms: 249+ means at or beyond it")
    if len(leaders) > 1:
        notes.append(f"leaders in order {leaders}: figures are the last one's")
    return Row(
        implementation=f"Kafka {version}", linger_ms=linger_ms, load=load, listener=listener,
        p75=p75, p99=p99, p999=p999, records_per_s=records_per_s,
        offered_per_s=float(load), skipped=None,
        cpu_s_per_million=(cpu_end - cpu_mark[1]) / records * 1e6 if records else None,
        window_s=window, note="; ".join(notes),
    )


# ---------------------------------------------------------------------------------------------
# entry point


def parse_loads(text: str | None) -> tuple[int, ...]:
    """``--throughput``'s value: comma-separated records/s (``1000,5000,20k``); None (flag
    absent) gives the single load :data:`THROUGHPUT`. Raises ValueError on a bad list."""
    if text is None:
        return (THROUGHPUT,)
    loads = []
    for part in text.split(","):
        part = part.strip().lower()
        value = int(float(part[:-1]) * 1000) if part.endswith("k") else int(part)
        if value <= 0:
            raise ValueError(f"--throughput: {part} is not a positive rate")
        loads.append(value)
    if not loads:
        raise ValueError("--throughput: no load given")
    return tuple(sorted(set(loads)))


def run(args: Any) -> list[Result]:
    timing = QUICK if getattr(args, "quick", False) else FULL
    loads = parse_loads(getattr(args, "throughput", None))
    problem = kafka_problem()
    kafka_name = f"Kafka {KAFKA_VERSION}"
    rows: list[Row] = []
    base = _bench_dir()
    print(f"quorum: {NODES} nodes on loopback, the leader writes {', '.join(f'{x:,}' for x in loads)} "
          f"records/s of {RECORD_SIZE} B (TestRaftServer's workload is {THROUGHPUT:,}); "
          f"{timing.description}; directories under {base}", flush=True)
    failovers: list[failover.FailoverRow] = []
    listeners = ("PLAINTEXT", "SSL") if getattr(args, "tls", False) else ("PLAINTEXT",)
    try:
        for load in loads:
            for linger in LINGERS_MS:
                for listener in listeners:
                    for name, runner in (("kwire", run_kwire), (kafka_name, run_kafka)):
                        if name != "kwire" and problem is not None:
                            rows.append(Row(name, linger, load, error=f"not run: {problem}", listener=listener))
                            continue
                        t0 = time.monotonic()
                        try:
                            row = runner(linger, timing, base, load, listener)
                        except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
                            row = Row(name, linger, load, error=f"{type(exc).__name__}: {exc}", listener=listener)
                        rows.append(row)
                        print(f"  {row.label}, {load:,} rec/s, linger {linger} ms: {time.monotonic() - t0:.0f} s, "
                              f"load average {_loadavg()}", flush=True)
        if not getattr(args, "no_failover", False):
            rounds = failover.QUICK_ROUNDS if getattr(args, "quick", False) else failover.ROUNDS
            failovers = run_failovers(base, rounds, problem)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(format_rows(rows), flush=True)
    if failovers:
        print(failover.format_rows(failovers), flush=True)
    if getattr(args, "report", None) is not None:
        write_report(Path(args.report), rows, failovers)
    sys.stdout.flush()
    return to_results(rows, timing) + failover_results(failovers)


def write_report(directory: Path, rows: Sequence[Row], failovers: Sequence[failover.FailoverRow]) -> None:
    """``--report DIR``: the rows kept and drawn as ``DIR/index.html`` (:mod:`tools.bench.quorum_report`)."""
    from tools.bench import quorum_report
    from tools.bench.core import environment, format_environment

    quorum_report.save(directory, [asdict(r) for r in rows], [asdict(f) for f in failovers],
                       environment=format_environment(environment()),
                       command=shlex.join(["python", "-m", "tools.bench", *sys.argv[1:]]))
    print(f"report: {quorum_report.write_report(directory)}", flush=True)


def run_failovers(base: Path, rounds: int, kafka_problem_text: str | None) -> list[failover.FailoverRow]:
    """Both sides' failover rounds (:mod:`tools.bench.failover`) at Kafka's default linger."""
    from tools.stock_kafka import version_tuple

    rows = []
    t0 = time.monotonic()
    rows.append(failover.run_side(
        lambda: failover.KwireQuorum(base / "failover-kwire", FAILOVER_LINGER_MS), "kwire", rounds))
    print(f"  kwire failover: {time.monotonic() - t0:.0f} s, load average {_loadavg()}", flush=True)
    name = f"Kafka {KAFKA_VERSION}"
    problem = kafka_problem_text
    if problem is None and version_tuple(KAFKA_VERSION) < (4,):
        problem = f"Kafka {KAFKA_VERSION} logs through log4j 1, without wall-clock milliseconds"
    if problem is not None:
        rows.append(failover.FailoverRow(name, error=f"not run: {problem}"))
        return rows
    t0 = time.monotonic()
    rows.append(failover.run_side(
        lambda: failover.KafkaQuorum(
            base / "failover-kafka", KAFKA_VERSION,
            lambda i, port, voters, data: kafka_server_properties(i, port, voters, data, FAILOVER_LINGER_MS)),
        name, rounds))
    print(f"  {name} failover: {time.monotonic() - t0:.0f} s, load average {_loadavg()}", flush=True)
    return rows


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
