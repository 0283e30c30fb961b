"""server.raft is sans-IO (ARCHITECTURE.md, "Layers", contract 3): it never imports trio and
none of its modules imports an I/O module or opens a file.

The import graph of the project's own modules is checked by ``make lint-imports`` (the contracts
in pyproject.toml): no chain from server.raft, kwire or messages reaches trio, socket, selectors,
asyncio, threading or a storage module that touches files. What is left here is what those
contracts cannot see: trio loaded at run time through a third-party package, and direct use of
the standard library's file, clock and OS modules (which kwire and storage may use, so no
contract forbids them along a chain) or of ``open()``.

(``socket`` does end up in ``sys.modules`` after ``import storage.records``: the codec
libraries it loads pull in ``importlib.metadata`` -> ``email.utils`` -> ``socket``. That is
outside server.raft and is checked here only for trio.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

RAFT = Path(__file__).resolve().parents[2] / "server" / "raft"
FORBIDDEN = {"os", "io", "time", "pathlib"}


def test_importing_the_core_does_not_import_trio() -> None:
    code = "import sys, server.raft.core; print('trio' in sys.modules, 'asyncio' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False False"


def test_no_raft_module_imports_io_or_opens_files() -> None:
    modules = sorted(RAFT.glob("*.py"))
    assert len(modules) >= 10
    for path in modules:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                raise AssertionError(f"{path.name}:{node.lineno} calls open()")
            else:
                continue
            assert not names & FORBIDDEN, f"{path.name}:{node.lineno} imports {names & FORBIDDEN}"
