"""Class data sharing archives (JDK dynamic AppCDS) of the stock Kafka classpaths that
``tools.stock_kafka`` runs, made by a short training run of a classpath: the JVMs its
``java_command`` builds map them when ``$KWIRE_KAFKA_CDS`` is set. This module knows nothing of
releases; ``tools.stock_kafka`` describes each classpath's run as a :class:`Training` and says
where its archive lives (``class_data_archive``).
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tools.local_cluster import free_ports

__all__ = ["CDS_QUIET_FLAGS", "Training", "make_class_data_archive"]

CDS_QUIET_FLAGS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Flags that keep a JVM from reporting on stdout an archive that does not fit it."""


@dataclass(frozen=True)
class Training:
    """What a training run needs of a classpath (:mod:`tools.stock_kafka` fills it in):
    ``java`` (the executable and the flags every JVM gets), the tool and server JVM flags,
    the release's ``classpath`` and ``logging`` flags, its StorageTool main class, whether it
    formats a dynamic quorum (KIP-853, 3.9+), and for a stand-in tools classpath its
    ``tools_classpath`` and ``tools_logging`` (None otherwise)."""

    java: tuple[str, ...]
    tool_flags: tuple[str, ...]
    server_flags: tuple[str, ...]
    classpath: str
    logging: tuple[str, ...]
    storage_class: str
    dynamic: bool
    tools_classpath: str | None = None
    tools_logging: tuple[str, ...] = ()


def make_class_data_archive(archive: Path, training: Training) -> None:
    """Write ``archive`` from a training run (``training``) on its classpath.

    The release's own classpath is trained on a server, where most of its JVMs' class loading
    is: StorageTool formats a standalone combined node (``process.roles=broker,controller``),
    which then runs until its broker answers an ApiVersions request, and stops on SIGTERM. An
    archive trained on StorageTool alone left a 4.4.0 controller's start at 1.9–2.1 CPU-s; this
    one takes it to 1.2–1.5 (a combined node's from 2.5–2.7 to 1.6–1.8), and a StorageTool
    format runs as fast with either. A stand-in tools classpath is trained on DumpLogSegments
    decoding the snapshot that format wrote.

    One training at a time per archive (a lock file beside it): a process that waited finds the
    archive made. The archive is written under a temporary name and renamed into place, so a
    reader sees a whole archive or none; a failed run leaves none (the JVMs then run without
    one)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.with_name(f"{archive.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():
            return
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
        try:
            with tempfile.TemporaryDirectory() as scratch:
                dump = [f"-XX:ArchiveClassesAtExit={partial}", *CDS_QUIET_FLAGS]
                _train(training, Path(scratch), dump)
            if partial.is_file():
                os.replace(partial, archive)
        except (OSError, subprocess.SubprocessError, TimeoutError):
            pass
        finally:
            partial.unlink(missing_ok=True)


def _train(training: Training, scratch: Path, dump: list[str]) -> None:
    """The training run of :func:`make_class_data_archive` in ``scratch``; ``dump`` are the
    flags that write the archive, given to the run's last JVM. Raises OSError,
    ``subprocess.SubprocessError`` or TimeoutError when a step fails."""
    controller_port, broker_port = free_ports(2)
    props = scratch / "server.properties"
    dynamic = training.dynamic  # KIP-853; a static quorum before 3.9
    quorum = (f"controller.quorum.bootstrap.servers=localhost:{controller_port}" if dynamic
              else f"controller.quorum.voters=1@localhost:{controller_port}")
    props.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        f"{quorum}\n"
        "controller.listener.names=CONTROLLER\n"
        f"listeners=CONTROLLER://localhost:{controller_port},PLAINTEXT://localhost:{broker_port}\n"
        f"log.dirs={scratch / 'data'}\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n",
        encoding="utf-8",
    )
    base = list(training.java)
    subprocess.run(
        [*base, *training.tool_flags, *training.logging, "-cp", training.classpath,
         training.storage_class, "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", str(props),
         *(["--standalone"] if dynamic else [])],
        capture_output=True, timeout=120, check=True,
    )
    if training.tools_classpath is not None:
        snapshot = scratch / "data" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
        subprocess.run(
            [*base, *training.tool_flags, *training.tools_logging, *dump, "-cp",
             training.tools_classpath, "org.apache.kafka.tools.DumpLogSegments",
             "--cluster-metadata-decoder", "--files", str(snapshot)],
            capture_output=True, timeout=120, check=True,
        )
        return
    server = subprocess.Popen(
        [*base, *training.server_flags, *training.logging, f"-Dkafka.logs.dir={scratch / 'logs'}",
         *dump, "-cp", training.classpath, "kafka.Kafka", str(props)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_api_versions(broker_port, server, timeout_s=60.0)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _wait_api_versions(port: int, server: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    """Wait until the broker on ``localhost:port`` answers an ApiVersions v0 request (its
    request handling is enabled once it has caught up with the metadata log and registered).
    Raises TimeoutError after ``timeout_s`` seconds, or at once when ``server`` exits."""
    # size, api key 18, version 0, correlation id 1, client id "cds" (Kafka's request header v1)
    request = struct.pack(">ihhih3s", 13, 18, 0, 1, 3, b"cds")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection(("localhost", port), timeout=2.0) as conn:
                conn.sendall(request)
                if len(conn.recv(8)) >= 4:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"no ApiVersions answer on localhost:{port}")
