"""server.raft is sans-IO (DESIGN §1, §2 rule 1): it never imports trio and none of its modules
imports an I/O module or opens a file.

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
FORBIDDEN = {"trio", "socket", "selectors", "asyncio", "os", "io", "threading", "time", "pathlib"}


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
