"""Every public definition in the listed packages has a docstring, which gives shapes, units,
errors raised and the Kafka class or KIP it mirrors (issue #10).

Public means: the module itself (a package's ``__init__.py`` stands for the package), every
class, function, method and property whose name does not start with an underscore, found in a
module whose name does not start with an underscore. Classes nested in a public class count;
functions nested in functions do not. Dataclasses and enums count as classes; their fields and
members do not. The check reads the source with ``ast`` only, so nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Packages whose public definitions must carry docstrings (issue #10: server, storage, kwire).
PACKAGES: tuple[str, ...] = ("kwire", "storage", "server")

# Directories (relative to the repository root) holding generated code, never checked.
GENERATED_DIRS: frozenset[str] = frozenset({"messages/generated"})

# Individual files left out on purpose, each with the reason. Empty: nothing is exempt.
EXCLUDED_FILES: frozenset[str] = frozenset()


def _module_files(package: str) -> Iterator[Path]:
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.as_posix() in EXCLUDED_FILES:
            continue
        if any(rel.as_posix().startswith(d + "/") for d in GENERATED_DIRS):
            continue
        if any(part.startswith("_") and part != "__init__.py" for part in rel.parts):
            continue
        yield path


def _top_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at import, looking inside ``if``/``try`` blocks (e.g. TYPE_CHECKING)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _top_level_statements(stmt.body)
            yield from _top_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _top_level_statements(block)
            for handler in stmt.handlers:
                yield from _top_level_statements(handler.body)
        else:
            yield stmt


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _public_definitions(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, Definition]]:
    for stmt in _top_level_statements(body):
        if not isinstance(stmt, Definition) or stmt.name.startswith("_"):
            continue
        qualname = f"{prefix}{stmt.name}"
        yield qualname, stmt
        if isinstance(stmt, ast.ClassDef):
            yield from _public_definitions(stmt.body, qualname + ".")


def missing_docstrings(package: str) -> list[str]:
    """``path:line qualname`` of every public definition in ``package`` without a docstring."""
    missing = []
    for path in _module_files(package):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), rel)
        if not ast.get_docstring(tree):
            missing.append(f"{rel}:1 <module>")
        for qualname, node in _public_definitions(tree.body, ""):
            if not ast.get_docstring(node):
                missing.append(f"{rel}:{node.lineno} {qualname}")
    return missing


@pytest.mark.parametrize("package", PACKAGES)
def test_public_definitions_have_docstrings(package: str) -> None:
    missing = missing_docstrings(package)
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(
        missing
    )
