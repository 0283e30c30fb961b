"""The benchmarks' figures kept where they are measured: ``BENCHMARKS.md``, one block per section.

``python -m tools.bench --record FILE`` (``make bench`` passes ``BENCHMARKS.md``) replaces, for
each section that ran and did not fail, that section's block with what it printed, headed by
when it ran, the commit it measured, the command and the machine; a section not run, or one
that failed, keeps its previous block, so every block is as old as its own run and no older
than the code it names. The file's blocks are delimited by HTML comments, which Markdown does
not render:

    <!-- bench:NAME -->
    ## NAME
    ...
    <!-- /bench:NAME -->

Blocks stay in the registry's order; text outside the blocks (the file's preamble) is kept.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

PREAMBLE = """# kwire benchmarks

Each section below is the output of one run of `python -m tools.bench SECTION` (`make bench`
runs them all and writes this file), headed by when it ran, the commit it measured, the command
and the machine with its load average as the section started (newer blocks end with it as the
section ended). A section is replaced only when it runs again, so each block is as old as its own run: read the
date, the commit and the load average before quoting a figure. The bench machine has 2 cores
shared with other work: prefer the ratios, kwire over the reference measured in the same run,
to the absolute figures. Figures are medians with the best run in brackets.
"""

_BLOCK = re.compile(r"<!-- bench:(?P<name>[\w-]+) -->\n.*?<!-- /bench:(?P=name) -->\n?", re.S)


def commit_label(repo: Path) -> str:
    """The commit being measured, as ``git describe --always --dirty`` prints it (``unknown``
    outside a git checkout or without git)."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=repo,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def block(name: str, *, header: str, output: str) -> str:
    """One section's block: its heading, the ``header`` line (when, commit, command, machine)
    and ``output`` as it was printed, fenced as text."""
    body = output.rstrip("\n").replace("```", "'''")
    return f"<!-- bench:{name} -->\n## {name}\n\n{header}\n\n```text\n{body}\n```\n<!-- /bench:{name} -->\n"


def parse(text: str) -> tuple[str, dict[str, str]]:
    """``(preamble, {section: block})`` of a file written by :func:`update`; text between or
    after blocks is dropped, the preamble (text before the first block) kept."""
    blocks = {m.group("name"): m.group(0).rstrip("\n") + "\n" for m in _BLOCK.finditer(text)}
    first = _BLOCK.search(text)
    preamble = text[: first.start()] if first else text
    return preamble.rstrip("\n") + "\n", blocks


def update(path: Path, order: Iterable[str], new_blocks: Mapping[str, str]) -> None:
    """Write ``path`` with ``new_blocks`` in place of those sections' old blocks, every other
    block kept, in ``order`` (sections the file has but ``order`` lacks follow, in file order).
    A missing file starts from :data:`PREAMBLE`."""
    try:
        preamble, blocks = parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        preamble, blocks = PREAMBLE, {}
    blocks.update(new_blocks)
    names = [n for n in order if n in blocks] + [n for n in blocks if n not in set(order)]
    text = preamble + "".join("\n" + blocks[n] for n in names)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
