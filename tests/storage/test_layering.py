"""storage is synchronous file I/O and never imports trio (the node runs it through
trio.to_thread: ARCHITECTURE.md, "The Outbox contract"). (``socket`` is loaded by the crc32c
package's own import of importlib.metadata, so only trio and asyncio are checked.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

STORAGE = Path(__file__).resolve().parents[2] / "storage"


def test_importing_every_storage_module_does_not_import_trio() -> None:
    modules = sorted(p.stem for p in STORAGE.glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 15
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module('storage.' + m)\n"
        "print('trio' in sys.modules, 'asyncio' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False False"


def test_no_storage_module_names_trio_or_server() -> None:
    for path in sorted(STORAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not roots & {"trio", "asyncio", "server", "tools"}, f"{path.name}:{node.lineno}"
