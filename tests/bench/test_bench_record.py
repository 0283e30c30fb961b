"""``BENCHMARKS.md`` as ``python -m tools.bench --record`` keeps it: a block per section, replaced
only when that section runs and succeeds, in the registry's order, the preamble kept."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from tools.bench import __main__ as bench_main
from tools.bench import record
from tools.bench.core import Result, SectionError


def test_a_missing_file_starts_from_the_preamble(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    record.update(path, ["a", "b"], {"b": record.block("b", header="when", output="figure 2\n")})
    text = path.read_text()
    assert text.startswith(record.PREAMBLE)
    preamble, blocks = record.parse(text)
    assert preamble == record.PREAMBLE and list(blocks) == ["b"]
    assert "```text\nfigure 2\n```" in blocks["b"]


def test_a_run_replaces_only_its_own_blocks_and_keeps_the_order(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    path.write_text("# my own preamble\n\nkept as written.\n")
    record.update(path, ["a", "b", "c"], {"c": record.block("c", header="h1", output="c1")})
    record.update(path, ["a", "b", "c"], {"a": record.block("a", header="h1", output="a1")})
    record.update(path, ["a", "b", "c"], {"c": record.block("c", header="h2", output="c2")})
    preamble, blocks = record.parse(path.read_text())
    assert preamble == "# my own preamble\n\nkept as written.\n"
    assert list(blocks) == ["a", "c"]
    assert "a1" in blocks["a"] and "c2" in blocks["c"] and "c1" not in blocks["c"]
    assert "h2" in blocks["c"]


def test_a_fence_in_the_output_cannot_end_the_block(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    record.update(path, ["a"], {"a": record.block("a", header="h", output="x\n```\ny")})
    _, blocks = record.parse(path.read_text())
    assert blocks["a"].count("```") == 2


def _section(module_name: str, *, fail: bool) -> types.ModuleType:
    module = types.ModuleType(module_name)

    def run(args: object) -> list[Result]:
        print(f"printed by {module_name}")
        if fail:
            raise SectionError("precondition failed")
        return [Result(section=module_name, what="op", unit="op/s", kwire=1.0, kwire_best=1.0,
                       reference=None, reference_best=None, reference_name="none", conditions="")]

    module.run = run  # type: ignore[attr-defined]
    return module


def test_the_command_records_what_each_section_printed_and_keeps_a_failed_ones_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "BENCHMARKS.md"
    record.update(path, ["good", "bad"], {"bad": record.block("bad", header="old", output="old figure")})
    for name, fail in (("good", False), ("bad", True)):
        monkeypatch.setitem(sys.modules, f"bench_fake_{name}", _section(f"bench_fake_{name}", fail=fail))
    monkeypatch.setattr(bench_main, "SECTIONS", {"good": "bench_fake_good", "bad": "bench_fake_bad"})
    assert bench_main.main(["good", "bad", "--record", str(path)]) == 1
    _, blocks = record.parse(path.read_text())
    assert list(blocks) == ["good", "bad"]
    assert "printed by bench_fake_good" in blocks["good"] and "op/s" in blocks["good"]
    assert "--record" in blocks["good"] and "load average" in blocks["good"]
    assert "old figure" in blocks["bad"] and "printed by" not in blocks["bad"]
