"""One pinned stock Kafka release as the compat tests run it: :class:`KafkaRelease`.

Runs the release's classes and tools (``kafka.run_tool("storage", [...])``,
``kafka.start("kafka.Kafka", [props])``) through :mod:`compat.kafka`, asks its
``kafka-metadata-quorum`` and ``kafka-metadata-shell``, and runs ``kwire dump-log`` worded as the
release's DumpLogSegments. Part of the harness (:mod:`compat.harness` re-exports it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compat import kafka as _kafka
from compat.kafka import require_kafka
from tools.stock_metadata_shell import metadata_shell_session

__all__ = [
    "KafkaRelease",
    "newest_pinned_release",
]

SHELL_ATTEMPT_S = 15.0
"""Seconds one attempt of :meth:`KafkaRelease.metadata_shell` may take: a shell that answers
does so in 2-5 s on a loaded 2-core machine (JVM start included); one that hangs never
does, and each hang cost the test 30 s when an attempt had that long."""


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
