"""Tests of the benchmark sections (smoke runs and their pieces; figures are never asserted)."""

from __future__ import annotations

from pathlib import Path


def leftover_processes(root: Path) -> list[str]:
    """Pids of running processes whose command line mentions ``root`` (a run's directory):
    empty once a run stopped everything it started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(root).encode() in cmdline:
                found.append(entry.name)
    return found
