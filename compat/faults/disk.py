"""Disk faults on real processes: a full disk, and a disk whose flushes fail or are slow.

* :func:`small_tmpfs` mounts a tmpfs of a given size at a directory: a metadata log directory
  there fills up and the next write fails with ENOSPC, as on a full disk. :meth:`Tmpfs.grow`
  remounts it larger (the operator freeing space) so the node can restart on the same files.
* :class:`FsyncFault` runs a process with ``fsync_fault.c`` preloaded: its fsync and fdatasync
  calls fail with EIO from the moment :meth:`FsyncFault.trip` is called -- what the kernel
  answers when a device cannot write dirty pages back. A JVM's ``FileChannel.force`` goes
  through the same libc calls, so stock Kafka meets the same fault.
* :class:`SlowFsync` preloads the same library: while :meth:`SlowFsync.slow` holds, each fsync
  and fdatasync first waits the given milliseconds (a disk whose write-back has slowed down).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

__all__ = ["FsyncFault", "SlowFsync", "Tmpfs", "fsync_fault_library", "small_tmpfs"]

SOURCE = Path(__file__).with_name("fsync_fault.c")
LIBRARY_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "faults"
"""Where :func:`fsync_fault_library` compiles ``fsync_fault.c`` by default (beside the jar cache,
``compat/.cache``)."""
TRIGGER_ENV = "KWIRE_FAULT_FSYNC_EIO"
"""The environment variable naming the file whose existence turns the EIO fault on
(``fsync_fault.c``)."""
DELAY_ENV = "KWIRE_FAULT_FSYNC_DELAY"
"""The environment variable naming the file that, while it exists, holds the milliseconds each
flush waits (``fsync_fault.c``)."""


@dataclass
class Tmpfs:
    """A tmpfs mounted at ``path`` with ``size_bytes`` of room."""

    path: Path
    size_bytes: int

    def grow(self, size_bytes: int) -> None:
        """Remount with ``size_bytes`` of room, keeping the files."""
        _run(["mount", "-o", f"remount,size={size_bytes}", str(self.path)])
        self.size_bytes = size_bytes


@contextlib.contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Tmpfs]:
    """Mount a tmpfs of ``size_bytes`` at ``path`` (created if missing) for the block, and
    unmount it after (lazily, should a process still hold a file there). Raises RuntimeError
    when not root or when ``mount`` fails."""
    if os.geteuid() != 0:
        raise RuntimeError("disk fault tests mount a tmpfs, which needs root")
    path.mkdir(parents=True, exist_ok=True)
    _run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)])
    try:
        yield Tmpfs(path, size_bytes)
    finally:
        _run(["umount", "--lazy", str(path)])


def fsync_fault_library(cache: Path = LIBRARY_CACHE) -> Path:
    """``fsync_fault.c`` compiled to a shared library under ``cache`` (once per source: the file
    name carries its hash). Raises RuntimeError when no C compiler is found or it fails."""
    source = SOURCE.read_bytes()
    library = cache / f"fsync_fault-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if library.is_file():
        return library
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("the fsync faults need a C compiler (cc) to build fsync_fault.c")
    cache.mkdir(parents=True, exist_ok=True)
    partial = library.with_name(f"{library.name}.{os.getpid()}.partial")
    _run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(SOURCE), "-ldl"])
    os.replace(partial, library)
    return library


@dataclass
class _FlushSwitch:
    """A switch of ``fsync_fault.c`` for the processes started with :meth:`env`: ``library``
    is :func:`fsync_fault_library`'s, ``trigger`` a path that does not exist yet, named to them
    by the environment variable ``VARIABLE``."""

    VARIABLE: ClassVar[str]
    library: Path
    trigger: Path

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the library preloaded."""
        env = dict(os.environ if base is None else base)
        preload = env.get("LD_PRELOAD", "")
        env["LD_PRELOAD"] = f"{self.library}:{preload}" if preload else str(self.library)
        env[self.VARIABLE] = str(self.trigger)
        return env


@dataclass
class FsyncFault(_FlushSwitch):
    """fsync and fdatasync failing with EIO in the processes started with :meth:`env`, from
    :meth:`trip` on."""

    VARIABLE: ClassVar[str] = TRIGGER_ENV

    def trip(self) -> None:
        """From now on every fsync and fdatasync of those processes fails with EIO."""
        self.trigger.touch()

    def heal(self) -> None:
        """Flushes work again (for a restart on the same machine)."""
        self.trigger.unlink(missing_ok=True)


@dataclass
class SlowFsync(_FlushSwitch):
    """fsync and fdatasync waiting before they flush, in the processes started with
    :meth:`env`, while :meth:`slow` holds (one trigger per process slows one node alone)."""

    VARIABLE: ClassVar[str] = DELAY_ENV

    def slow(self, delay_ms: int) -> None:
        """From now on every flush of those processes first waits ``delay_ms``."""
        partial = self.trigger.with_name(f"{self.trigger.name}.partial")
        partial.write_text(str(delay_ms), encoding="ascii")
        os.replace(partial, self.trigger)  # never seen half written

    def heal(self) -> None:
        """Flushes take their usual time again."""
        self.trigger.unlink(missing_ok=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
