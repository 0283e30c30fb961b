"""Stock ``kafka-metadata-shell`` sessions over a snapshot file (:func:`metadata_shell_session`),
run from the pinned jars through :mod:`tools.stock_kafka`."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence

from tools.stock_kafka import java_command, tool_class, tool_release

__all__ = ["metadata_shell_session"]


def metadata_shell_session(
    version: str,
    snapshot: str | os.PathLike[str],
    commands: Sequence[str],
    *,
    jvm_args: Sequence[str] = (),
    timeout: float = 120.0,
    errors: list[str] | None = None,
) -> list[str]:
    """Run ``commands`` in one interactive ``kafka-metadata-shell --snapshot SNAPSHOT`` of
    ``version`` once the shell holds the whole image; the output of each, as text.

    The shell's one-command mode can answer from an empty image: it runs its command once its
    loader has caught up with the file (``MetadataShell.waitUntilCaughtUp``), which may be
    before the loader has handed the image to the shell's own publisher (a few hundred records
    of any writer's snapshot are enough to lose that race). Here the shell is asked
    ``cat /image/features/metadataVersion`` until it answers a level, then the commands run.
    ``errors`` (when given) receives the shell's stderr. The shell is killed after ``timeout``
    seconds (a 3.9 shell can hang in its loader), which raises ``subprocess.TimeoutExpired``;
    RuntimeError when the shell exits early, KafkaUnavailable when Java or the jars are
    missing. The shell's ``java.io.tmpdir`` is a directory of its own, removed afterwards: the
    shell (its raft manager's scratch directory, JLine's native library) deletes what it made
    there only on a clean exit, and it is killed."""
    main_class = tool_class(version, "metadata-shell")
    tools = tool_release(version, "metadata-shell") != version
    scratch = tempfile.TemporaryDirectory(prefix="kwire-metadata-shell-")
    command = java_command(version, main_class, ["--snapshot", str(snapshot)],
                           jvm_args=[*jvm_args, f"-Djava.io.tmpdir={scratch.name}"], tools=tools)
    stderr_file = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
                               text=True, bufsize=1)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    killer = threading.Timer(timeout, process.kill)  # a read blocked on a hung shell then ends
    killer.start()
    sentinel = "kwire-end-of-output"

    def ask(line: str) -> list[str]:
        """Send ``line`` and a marker command; the lines the shell printed before the marker's
        error (the prompt stripped)."""
        stdin.write(f"{line}\n{sentinel}\n")
        stdin.flush()
        out: list[str] = []
        while True:
            text = stdout.readline()
            if not text and not killer.is_alive():
                raise subprocess.TimeoutExpired(command, timeout)
            if not text:
                raise RuntimeError(f"kafka-metadata-shell {version} exited: {''.join(out)[-2000:]}")
            text = text.removeprefix(">> ").rstrip("\n")
            if sentinel in text:
                return out
            if text not in ("Loading...", "Starting...", "[ Kafka Metadata Shell ]"):
                out.append(text)

    try:
        while True:
            answer = ask("cat /image/features/metadataVersion")
            if answer and "-IV" in answer[-1]:  # a level's name (3.9-IV0), not an empty image's
                break
            time.sleep(0.2)
        return ["\n".join(ask(line)) for line in commands]
    finally:
        killer.cancel()
        with contextlib.suppress(OSError):
            stdin.close()
        process.kill()
        process.wait()
        if errors is not None:
            stderr_file.seek(0)
            errors.append(stderr_file.read())
        stderr_file.close()
        scratch.cleanup()
