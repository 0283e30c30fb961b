"""Ports, properties and processes of the compat tests, and waiting with deadlines.

:func:`free_port` and :func:`controller_properties` give a loopback port and a controller's
``server.properties``; :func:`kwire_cli`, :func:`format_kwire`, :func:`start_kwire` and
:func:`start_stock` run the ``kwire`` command line and start a kwire node or a stock controller;
:func:`wait_until` and :func:`wait_listening` poll a condition until it holds, failing at a
deadline. Part of the harness (:mod:`compat.harness` re-exports it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from compat.kafka import REPO_DIR
from compat.stock_release import KafkaRelease
from kwire.uuid import Uuid
from tools.local_cluster import free_ports

__all__ = [
    "CLUSTER_ID",
    "DIR_ID",
    "controller_properties",
    "format_kwire",
    "free_port",
    "kwire_cli",
    "start_kwire",
    "start_stock",
    "wait_listening",
    "wait_until",
]

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
"""The cluster id of every directory the compat tests format."""
DIR_ID = Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ")
"""A fixed directory id, for directories kwire formats in a test."""

T = TypeVar("T")


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
