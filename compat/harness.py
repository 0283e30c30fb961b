"""What the compat tests share: pinned releases to run, free ports, server.properties, kwire
and stock processes, mixed quorums, stock tools over logs, and waiting with deadlines.

Every compat test module takes these from here (and from the fixtures of
``compat/conftest.py``); no test module imports another.

* :class:`KafkaRelease`: one pinned release, to run its classes and tools
  (``kafka.run_tool("storage", [...])``, ``kafka.start("kafka.Kafka", [props])``).
* :func:`free_port`, :func:`controller_properties`: a loopback port and a controller's
  ``server.properties``.
* :func:`kwire_cli`, :func:`format_kwire`, :func:`start_kwire`, :func:`start_stock`: the
  ``kwire`` command line, and a kwire node or a stock controller started on a properties file.
* :class:`Quorum`: controllers of both kinds in one static or dynamic quorum, started, killed,
  restarted and asked who leads.
* :func:`run_stock_controller`: a stock controller run until its log holds what a test waits
  for; :func:`assert_dumps_match`: stock DumpLogSegments and ``kwire dump-log`` print the same.
* :func:`wait_until`, :func:`wait_listening`: poll a condition (a port that accepts
  connections) until it holds, failing at a deadline.
* :func:`log_batches`, :func:`batches_below`: the batches of a metadata partition directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from compat import kafka as _kafka
from compat.faults.net import Network
from compat.kafka import REPO_DIR, logging_config, require_kafka, stop_processes
from kwire.uuid import Uuid
from messages.metadata import decode_record
from messages.runtime import Message
from storage.batch_scan import scan_batches
from storage.records import RecordBatch
from tools.client_config import PLAINTEXT, ClientSecurity
from tools.local_cluster import free_ports
from tools.quorum_client import QuorumToolError, QuorumView, describe
from tools.stock_metadata_shell import metadata_shell_session

__all__ = [
    "CLUSTER_ID", "DIR_ID", "ELECTION_BOUND_S", "ELECTION_TIMEOUT_MS", "FETCH_TIMEOUT_MS", "PARTITION",
    "REPO_DIR", "START_TIMEOUT_S", "KafkaRelease", "Quorum", "assert_dumps_match", "batches_below",
    "controller_properties", "format_kwire", "free_port", "kwire_cli", "log_batches", "newest_pinned_release",
    "run_stock_controller", "segment_files", "start_kwire", "start_stock", "stop_processes", "wait_listening",
    "wait_until",
]

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
"""The cluster id of every directory the compat tests format."""
DIR_ID = Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ")
"""A fixed directory id, for directories kwire formats in a test."""
PARTITION = "__cluster_metadata-0"

SHELL_ATTEMPT_S = 15.0
"""Seconds one attempt of :meth:`KafkaRelease.metadata_shell` may take: a shell that answers
does so in 2-5 s on a loaded 2-core machine (JVM start included); one that hangs never
does, and each hang cost the test 30 s when an attempt had that long."""

T = TypeVar("T")


# -- releases ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class KafkaRelease:
    """One pinned Kafka release, ready to run."""

    version: str

    @property
    def home(self) -> Path:
        return _kafka.kafka_home(self.version)

    @property
    def classpath(self) -> str:
        return _kafka.classpath(self.version)

    def at_least(self, *parts: int) -> bool:
        """``kafka.at_least(4, 3)``: whether this release is 4.3 or newer."""
        return _kafka.version_tuple(self.version) >= parts

    def tool_class(self, tool: str) -> str:
        return _kafka.tool_class(self.version, tool)

    def tool_release(self, tool: str) -> str:
        """Which release's code runs ``tool`` (see compat.kafka.tool_release)."""
        return _kafka.tool_release(self.version, tool)

    def run(self, main_class: str, args: Sequence[str | os.PathLike[str]] = (),
            **kwargs: object) -> subprocess.CompletedProcess[str]:
        return _kafka.run_kafka_class(self.version, main_class, args, **kwargs)  # type: ignore[arg-type]

    def run_tool(self, tool: str, args: Sequence[str | os.PathLike[str]] = (),
                 **kwargs: object) -> subprocess.CompletedProcess[str]:
        return _kafka.run_tool(self.version, tool, args, **kwargs)

    def quorum_status(self, bootstrap: str) -> dict[str, str]:
        """``kafka-metadata-quorum --bootstrap-controller BOOTSTRAP describe --status`` as a
        ``{field: value}`` dict (ClusterId, LeaderId, LeaderEpoch, HighWatermark, ...)."""
        out = self.run_tool(
            "metadata-quorum", ["--bootstrap-controller", bootstrap, "describe", "--status"]
        ).stdout
        fields: dict[str, str] = {}
        for line in out.splitlines():
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip()] = value.strip()
        return fields

    def metadata_shell(self, snapshot: str | os.PathLike[str], *command: str) -> subprocess.CompletedProcess[str]:
        """``kafka-metadata-shell --snapshot SNAPSHOT COMMAND...``, run in an interactive session
        once the shell holds the image (``tools.stock_metadata_shell.metadata_shell_session``: its
        one-command mode can answer from an empty image). The 3.9 shell sometimes never gets
        past loading a file (its loader waits for a high watermark its file reader has already
        passed; 2 of 16 runs on one file here): each attempt gets :data:`SHELL_ATTEMPT_S` and
        the command is tried up to three times. The result carries the command's output and the
        shell's stderr."""
        line = " ".join(str(part) for part in command)
        for attempt in range(3):
            errors: list[str] = []
            try:
                (out,) = metadata_shell_session(self.version, snapshot, [line], timeout=SHELL_ATTEMPT_S, errors=errors)
            except subprocess.TimeoutExpired:
                if attempt == 2:
                    raise
                continue
            return subprocess.CompletedProcess(["kafka-metadata-shell", "--snapshot", str(snapshot), *command], 0,
                                               out + "\n", "".join(errors))
        raise AssertionError("unreachable")

    def kwire_dump(self, files: Sequence[str | os.PathLike[str]], **flags: bool) -> tuple[str, str]:
        """``(stdout, stderr)`` of ``kwire dump-log`` over ``files`` worded as this release's
        DumpLogSegments words it: LeaderChange records are decoded from Kafka 4.1 on
        (KAFKA-19069), and the Scala tool (up to 4.2) reports index problems differently from the
        Java port (4.3+, KAFKA-14579). ``flags`` are dump-log's options, e.g.
        ``cluster_metadata_decoder=True``."""
        import io

        from tools import dump_log

        out, err = io.StringIO(), io.StringIO()
        release = _kafka.version_tuple(self.tool_release("dump-log"))
        dump_log.dump_files(
            [str(f) for f in files], out=out, err=err, leader_change_as_type=release < (4, 1),
            scala_report=release < (4, 3), **flags,  # type: ignore[arg-type]
        )
        return out.getvalue(), err.getvalue()

    def start(self, main_class: str, args: Sequence[str | os.PathLike[str]] = (),
              **kwargs: object) -> subprocess.Popen[bytes]:
        return _kafka.start_kafka_class(self.version, main_class, args, **kwargs)  # type: ignore[arg-type]


def newest_pinned_release() -> KafkaRelease:
    """The newest pinned release, required (see :func:`compat.kafka.require_kafka`)."""
    version = _kafka.PINNED_VERSIONS[-1]
    require_kafka(version)
    return KafkaRelease(version)


# -- waiting ----------------------------------------------------------------------------------

def wait_until(
    what: str, get: Callable[[], T], timeout_s: float, *, ok: Callable[[T], object] = bool,
    interval_s: float = 0.2, alive: Sequence[subprocess.Popen[bytes]] = (),
) -> T:
    """Call ``get`` every ``interval_s`` until ``ok`` holds for what it returns (by default:
    until it returns something truthy), and return that. Fails (AssertionError naming ``what``
    and the last value) after ``timeout_s``, or at once when a process in ``alive`` has
    exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = get()
        if ok(value):
            return value
        for proc in alive:
            if proc.poll() is not None:
                raise AssertionError(f"{what}: a process exited with {proc.returncode} (last: {value!r})")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s (last: {value!r})")
        time.sleep(interval_s)  # poll interval


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout_s: float = 60.0) -> None:
    """Until something accepts TCP connections on loopback ``port``; fails when ``proc`` exits
    first or after ``timeout_s``."""

    def accepts() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(f"a listener on port {port}", accepts, timeout_s, interval_s=0.1, alive=[proc])


# -- ports and properties ---------------------------------------------------------------------

def free_port() -> int:
    """A loopback TCP port that was free a moment ago (see tools.local_cluster.free_ports)."""
    return free_ports(1)[0]


def controller_properties(path: Path, data: Path, port: int, extra: str = "", *, node_id: int = 1,
                          bootstrap_port: int | None = None) -> Path:
    """A controller's ``server.properties`` at ``path``: node ``node_id`` listening on ``port``
    with its log in ``data``, its bootstrap server ``bootstrap_port`` (default: itself, a
    standalone controller); ``extra`` lines appended as they are."""
    path.write_text(
        "process.roles=controller\n"
        f"node.id={node_id}\n"
        f"controller.quorum.bootstrap.servers=localhost:{bootstrap_port or port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"listeners=CONTROLLER://localhost:{port}\n"
        f"log.dirs={data}\n" + extra,
        encoding="utf-8",
    )
    return path


# -- processes --------------------------------------------------------------------------------

def kwire_cli(args: Sequence[str | os.PathLike[str]], *, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``kwire ARGS...`` run to completion, its output captured as text, as the process
    ``python -m tools.cli ARGS...`` would end: its exit status (argparse's 2 for a usage error,
    1 with the traceback on stderr for an uncaught exception), stdout and stderr.

    It runs in this process (``tools.cli.main``), not in a new interpreter: a kwire process
    spends most of a short command importing kwire (0.7 CPU-s), and the compat tests run the
    command line dozens of times. The commands it serves here (``storage format``,
    ``metadata-quorum``) bound their own waits. ``check`` raises ``CalledProcessError`` on a
    non-zero status, as ``subprocess.run`` does."""
    import contextlib
    import io
    import traceback

    from tools import cli

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            code = 1
    done = subprocess.CompletedProcess([sys.executable, "-m", "tools.cli", *argv], code, out.getvalue(), err.getvalue())
    if check:
        done.check_returncode()
    return done


def format_kwire(props: Path, *flags: str, cluster_id: str = CLUSTER_ID) -> None:
    """``kwire storage format -c PROPS -t CLUSTER_ID FLAGS...``; fails the test with its output
    when it fails."""
    done = kwire_cli(["storage", "format", "-c", props, "-t", cluster_id, *flags])
    assert done.returncode == 0, done.stdout + done.stderr


def start_kwire(props: Path, out: Path, command: str = "server-start", *,
                prefix: Sequence[str] = (), env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A kwire node (``kwire server-start PROPS``), its output appended to ``out``; ``prefix``
    is a command it runs under (e.g. ``ip netns exec NS``), ``env`` variables added to this
    process's environment."""
    with open(out, "ab") as sink:
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", "tools.cli", command, str(props)], cwd=REPO_DIR, stdout=sink,
            stderr=subprocess.STDOUT, env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )


def start_stock(kafka: KafkaRelease, props: Path, out: Path, *, logs_dir: Path | None = None,
                jvm_args: Sequence[str] = (), prefix: Sequence[str] = (),
                env: Mapping[str, str] | None = None,
                classpath: Sequence[str | os.PathLike[str]] = ()) -> subprocess.Popen[bytes]:
    """A stock Kafka server (``kafka.Kafka PROPS``, a controller or a broker), its output
    appended to ``out`` and its own log files in ``logs_dir`` (default: beside ``out``);
    ``prefix`` is a command it runs under (e.g. ``ip netns exec NS``), ``env`` variables added
    to this process's environment, ``classpath`` entries added before the release's jars."""
    with open(out, "ab") as sink:
        return kafka.start(
            "kafka.Kafka", [props], logs_dir=logs_dir or out.parent, jvm_args=list(jvm_args),
            stdout=sink.fileno(), stderr=sink.fileno(), prefix=prefix, env=env, extra_classpath=classpath,
        )


# -- logs -------------------------------------------------------------------------------------

def segment_files(part: Path) -> list[Path]:
    """The ``.log`` segments of a partition directory, oldest first."""
    return sorted(part.glob("*.log"))


def log_batches(part: Path) -> list[RecordBatch]:
    """Every batch of a partition directory's segments, in order."""
    batches: list[RecordBatch] = []
    for segment in segment_files(part):
        batches += scan_batches(segment.read_bytes()).batches
    return batches


def metadata_records(data: Path) -> Iterator[tuple[Message, int]]:
    """Every data record of the metadata log under the log directory ``data``, in offset
    order, decoded as ``(message, version)`` (control batches left out)."""
    for batch in log_batches(data / PARTITION):
        if not batch.is_control:
            for value in batch.iter_values():
                assert value is not None
                yield decode_record(value)


def batches_below(data: Path, high_watermark: int) -> list[bytes]:
    """The bytes of each metadata-log batch under the log directory ``data`` that ends below
    ``high_watermark``."""
    return [b.to_bytes() for b in log_batches(data / PARTITION) if b.last_offset < high_watermark]


def run_stock_controller(
    kafka: KafkaRelease, props: Path, part: Path, logs: Path, done: Callable[[list[RecordBatch]], bool],
    while_running: Callable[[], None] | None = None, timeout_s: float = 180.0,
) -> None:
    """Start a stock controller, wait until ``done`` holds for its log in ``part`` (then call
    ``while_running``), stop it gracefully. Its output goes to ``logs``."""
    logs.mkdir(exist_ok=True)
    with open(logs / "stdout.txt", "ab") as out, open(logs / "stderr.txt", "ab") as err:
        proc = kafka.start("kafka.Kafka", [props], logs_dir=logs, stdout=out.fileno(), stderr=err.fileno())
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                batches = log_batches(part) if part.exists() else []
                if done(batches):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (logs / "stderr.txt").read_text(errors="replace")[-3000:]
                    server_log = logs / "server.log"
                    if server_log.exists():
                        tail += server_log.read_text(errors="replace")[-3000:]
                    pytest.fail(f"stock controller {kafka.version} did not get there (exit {proc.poll()}):\n{tail}")
                time.sleep(0.2)  # poll interval
            if while_running is not None:
                while_running()
        finally:
            stop_processes([proc])


_REPORT_PREFIXES = (
    "Mismatches in", "  Index offset", "Found timestamp mismatch", "  Index timestamp",
    "Found out of order", "The following indexed offsets", "Indexed offset", "Non-consecutive",
)


def assert_dumps_match(kafka: KafkaRelease, files: list[Path], **flags: bool) -> str:
    """Stock DumpLogSegments and kwire dump-log print the same lines, and report the same index
    problems on stderr; returns the stock output. ``flags`` are dump-log's options, e.g.
    ``cluster_metadata_decoder=True``."""
    args = [f"--{name.replace('_', '-')}" for name, on in flags.items() if on]
    stock = kafka.run_tool("dump-log", [*args, "--files", ",".join(map(str, files))])
    mine, errors = kafka.kwire_dump(files, **flags)
    assert mine.splitlines() == stock.stdout.splitlines()
    lines = stock.stderr.splitlines()
    stock_report = []
    for i, line in enumerate(lines):
        # The Java DumpLogSegments (4.3+) reports every file that does not start at offset 0 as
        # "-1 is followed by <first offset>" (it lost 3.9's first-record check); kwire keeps 3.9's.
        if line.startswith("Non-consecutive") and i + 1 < len(lines) and lines[i + 1].startswith("  -1 is followed by"):
            continue
        if line.startswith(_REPORT_PREFIXES) or (line.startswith("  ") and " is followed by " in line and "-1 is" not in line):
            stock_report.append(line)
    assert errors.splitlines() == stock_report
    return stock.stdout


# -- quorums of both kinds --------------------------------------------------------------------

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
ELECTION_BOUND_S = (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 6.0
"""How long a :class:`Quorum` may be without a leader: the fetch timeout plus two election
timeouts, plus slack for DescribeQuorum polling on a loaded machine."""
START_TIMEOUT_S = 90.0
"""How long a quorum's first election may take, JVM start-ups included."""


class Quorum:
    """Controllers ``ids`` (kwire for ``kwire_ids``, stock otherwise) under ``root``: node i has
    ``i.properties``, ``data<i>``, ``i.out``. Static: every node a voter. Dynamic: the
    ``voter_ids`` (default all) are the initial controllers, the others are formatted with
    ``--no-initial-controllers`` and start as observers. ``extra`` lines go into every node's
    properties, ``kwire_extra`` lines into the kwire nodes' only; ``env`` maps a node to the
    variables added to its process's environment; ``format_args`` go to every node's ``storage
    format`` (e.g. ``--add-scram``); ``security`` is how the harness's own DescribeQuorum
    connections log in (a secured controller listener). With a ``network``
    (``compat.faults.net.Network`` with hosts ``"1"``, ``"2"``, ... and ``"client"``), node i
    runs on host ``str(i)`` at its address, and the quorum is asked from ``"client"``; else
    every node is on localhost."""

    def __init__(
        self, kafka: KafkaRelease, root: Path, kwire_ids: set[int], dynamic: bool,
        ids: tuple[int, ...] = (1, 2, 3), voter_ids: tuple[int, ...] | None = None,
        extra: str = "", network: Network | None = None, kwire_extra: str = "",
        env: Mapping[int, Mapping[str, str]] | None = None, format_args: Sequence[str] = (),
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.kafka, self.root, self.kwire_ids, self.network = kafka, root, kwire_ids, network
        self.security = security
        self.env = dict(env or {})
        self.dynamic = dynamic
        self.ports = {i: free_port() for i in ids}
        self.hosts = {i: "localhost" if network is None else network.address(str(i)) for i in ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.answers: dict[int, str] = {}
        """node -> what it last answered to :meth:`leader`"""
        self.logging = self._raft_logging(root)
        voter_ids = ids if voter_ids is None else voter_ids
        voters = ",".join(f"{i}@{self.hosts[i]}:{p}" for i, p in self.ports.items())
        bootstrap = self.bootstrap
        initial = ",".join(f"{i}@{self.hosts[i]}:{self.ports[i]}:{Uuid.random()}" for i in voter_ids)
        quorum = f"controller.quorum.bootstrap.servers={bootstrap}" if dynamic else f"controller.quorum.voters={voters}"
        for i, port in self.ports.items():
            format_flags = (
                ["--initial-controllers", initial] if dynamic and i in voter_ids else ["--no-initial-controllers"]
            )
            props = root / f"{i}.properties"
            props.write_text(
                f"process.roles=controller\nnode.id={i}\n{quorum}\n"
                f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://{self.hosts[i]}:{port}\n"
                f"log.dirs={root / f'data{i}'}\n"
                f"controller.quorum.election.timeout.ms={ELECTION_TIMEOUT_MS}\n"
                f"controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n" + extra
                + (kwire_extra if i in kwire_ids else ""),
                encoding="utf-8",
            )
            if i in kwire_ids:
                format_kwire(props, *format_flags, *format_args)
            else:
                kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, *format_flags, *format_args])

    @property
    def bootstrap(self) -> str:
        """Every node's address, for ``--bootstrap-controller``."""
        return ",".join(f"{self.hosts[i]}:{p}" for i, p in self.ports.items())

    def _raft_logging(self, root: Path) -> Path:
        """The harness's stock logging config plus Kafka's raft package at INFO (its role
        transitions), written under ``root``, so a failed run shows how each election went."""
        base = logging_config(self.kafka.version)
        extra = (
            "logger.raft.name = org.apache.kafka.raft\nlogger.raft.level = INFO\n"
            if base.name == "log4j2.properties"
            else "log4j.logger.org.apache.kafka.raft=INFO\n"
        )
        path = root / base.name
        path.write_text(base.read_text(encoding="utf-8") + extra, encoding="utf-8")
        return path

    def _logging_flag(self) -> str:
        if self.logging.name == "log4j2.properties":
            return f"-Dlog4j2.configurationFile={self.logging}"
        return f"-Dlog4j.configuration={self.logging.as_uri()}"

    def report(self) -> str:
        """Each node's kind and state (running or its exit code) and the last role
        transitions, errors and faults in its output."""
        lines: list[str] = []
        for i in self.ports:
            proc = self.procs.get(i)
            state = "not started" if proc is None else "running" if proc.poll() is None else f"exited {proc.returncode}"
            kind = "kwire" if i in self.kwire_ids else f"kafka {self.kafka.version}"
            lines.append(f"--- node {i} ({kind}, {state}) ---")
            out = self.root / f"{i}.out"
            text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
            wanted = [
                line for line in text.splitlines()
                if any(k in line for k in ("kwire.node", "transition", "ERROR", "WARN", "fatal", "Exception", "Traceback"))
                and "DESCRIBE_CLUSTER" not in line and "Direct-to-controller" not in line
            ]
            lines.extend(line[:400] for line in wanted[-30:])
            if proc is not None and proc.poll() is not None:
                lines.append("(last lines of its output)")
                lines.extend(line[:400] for line in text.splitlines()[-15:])
        return "\n".join(lines)

    def start(self, i: int) -> None:
        props = self.root / f"{i}.properties"
        out = self.root / f"{i}.out"
        prefix = [] if self.network is None else self.network.command(str(i), [])
        env = self.env.get(i)
        if i in self.kwire_ids:
            self.procs[i] = start_kwire(props, out, prefix=prefix, env=env)
        else:
            self.procs[i] = start_stock(
                self.kafka, props, out, logs_dir=self.root / f"logs{i}", jvm_args=[self._logging_flag()],
                prefix=prefix, env=env,
            )

    def describe(self, i: int) -> QuorumView:
        """The quorum as asked through node ``i`` (its DescribeCluster names the active
        controller, which answers DescribeQuorum) within 3 s. Raises OSError, QuorumToolError
        or ``trio.TooSlowError``."""
        address = f"{self.hosts[i]}:{self.ports[i]}"
        if self.network is None:
            return trio.run(describe, address, 3.0, self.security)
        return self.network.call("client", lambda: trio.run(describe, address, 3.0, self.security))

    def leader(self, excluded: int | None = None) -> tuple[int, int, int] | None:
        """(leader id, epoch, high watermark) as a live node other than ``excluded`` sees it.
        What each node answered (or the error, and after how long) is kept in ``answers``."""
        for i in self.ports:
            if i == excluded or i not in self.procs or self.procs[i].poll() is not None:
                continue
            asked = time.monotonic()
            try:
                view = self.describe(i)
            except (OSError, QuorumToolError, trio.TooSlowError) as exc:
                self.answers[i] = f"{type(exc).__name__}: {str(exc)[:120]} after {time.monotonic() - asked:.1f} s"
                continue
            p = view.partition
            self.answers[i] = f"leader {p.leader_id} epoch {p.leader_epoch} hw {p.high_watermark}"
            if p.leader_id >= 0 and p.leader_id != excluded:
                return p.leader_id, p.leader_epoch, p.high_watermark
        return None

    def wait_leader(self, timeout_s: float, excluded: int | None = None) -> tuple[int, int, int]:
        """(leader id, epoch, high watermark) once a leader other than ``excluded`` is known;
        the AssertionError after ``timeout_s`` says what each node last answered."""
        self.answers.clear()
        try:
            found = wait_until(f"a leader (other than {excluded})", lambda: self.leader(excluded), timeout_s,
                               interval_s=0.1)
        except AssertionError as exc:
            answers = "; ".join(f"node {i}: {a}" for i, a in sorted(self.answers.items()))
            raise AssertionError(f"{exc} (last answers: {answers or 'none asked'})") from None
        assert found is not None
        return found

    def stop(self) -> None:
        stop_processes(self.procs.values())

    def kill(self, i: int, sig: int = signal.SIGKILL, timeout_s: float = 60.0) -> None:
        """Send ``sig`` to node ``i`` and wait until it has exited."""
        self.procs[i].send_signal(sig)
        self.procs[i].wait(timeout_s)

    def voters_caught_up(self, high_watermark: int, since_ms: int = -1) -> bool:
        """Whether every voter's log end offset, as the leader reports it, reached
        ``high_watermark`` in a fetch at or after ``since_ms`` (wall-clock ms): the leader keeps
        a restarted voter's offset from before its kill until it fetches again, which must not
        count."""
        for i in self.ports:
            if i not in self.procs or self.procs[i].poll() is not None:
                continue
            try:
                view = self.describe(i)
            except (OSError, QuorumToolError, trio.TooSlowError):
                continue
            return all(v.log_end_offset >= high_watermark and v.last_fetch_timestamp >= since_ms
                       for v in view.partition.current_voters)
        return False

    @contextlib.contextmanager
    def running(self, then: Callable[[], None] = lambda: None) -> Iterator[Quorum]:
        """Start every node and wait for a first leader (within :data:`START_TIMEOUT_S`); when
        the block ends, print :meth:`report` if it failed, stop every node, then call ``then``
        (e.g. to print what the test saw, either way)."""
        try:
            for i in self.ports:
                self.start(i)
            self.wait_leader(START_TIMEOUT_S)
            yield self
        except BaseException:
            print(self.report())
            raise
        finally:
            self.stop()
            then()

    def settle_after_faults(self) -> tuple[int, dict[int, bytes]]:
        """Once the faults are over: until the high watermark moves (within 30 s), then
        :meth:`settled_high_watermark`. Returns that high watermark and what each stock node
        has written to its output so far (stopping a JVM still starting can log a fatal fault of
        its own shutdown, which must not count)."""
        _, _, hwm = self.wait_leader(ELECTION_BOUND_S)
        wait_until("the high watermark to move after the faults", lambda: self.wait_leader(ELECTION_BOUND_S)[2],
                   30.0, ok=lambda moved: moved > hwm)
        final_hwm = self.settled_high_watermark()
        return final_hwm, {i: (self.root / f"{i}.out").read_bytes() for i in set(self.ports) - self.kwire_ids}

    def assert_agreed(self, final_hwm: int, logged: dict[int, bytes]) -> None:
        """After :meth:`stop`: no stock node logged a fatal fault or an IllegalStateException in
        ``logged`` (:meth:`settle_after_faults`), and every node's log holds the same batches,
        byte for byte, below ``final_hwm``."""
        for raw in logged.values():
            text = raw.decode(errors="replace")
            assert "fatal fault" not in text and "IllegalStateException" not in text, text[-3000:]
        logs = {i: batches_below(self.root / f"data{i}", final_hwm) for i in self.ports}
        first = logs[min(logs)]
        assert first and all(log == first for log in logs.values()), {i: len(b) for i, b in logs.items()}

    def settled_high_watermark(self) -> int:
        """The high watermark once every voter has reached it in a fetch made after this call
        began (within 60 s), after checking that no process died."""
        since_ms = time.time_ns() // 1_000_000
        dead = {i: p.returncode for i, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"processes died: {dead}"
        _, _, hwm = self.wait_leader(ELECTION_BOUND_S)
        wait_until(f"every voter at offset {hwm}", lambda: self.voters_caught_up(hwm, since_ms), 60.0)
        return hwm
