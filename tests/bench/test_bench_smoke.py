"""Smoke test of ``python -m tools.bench codec --quick``: the section runs, its results are
well-formed, and its precondition (kwire and kafka-python encode each message to the same bytes)
holds. Figures are never asserted on: benchmarks are not tests."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("kafka")

from tools.bench import codec  # noqa: E402
from tools.bench.core import SectionError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", codec.cases(), ids=lambda c: f"{c.name}-v{c.version}")
def test_both_sides_encode_identical_bytes(case: codec.Case) -> None:
    data = codec.check_case(case)
    assert data == bytes(case.ref_obj.encode(version=case.version))
    assert case.leaves(case.kwire_cls.decode(data, case.version)) == case.leaves(
        case.ref_cls.decode(data, version=case.version))


def test_precondition_failure_stops_the_section() -> None:
    case = codec.cases()[0]
    case.kwire_obj.voter_id += 1  # now the two sides hold different messages
    with pytest.raises(SectionError, match="encodings differ"):
        codec.check_case(case)


def test_fetch_records_are_a_real_one_mebibyte_batch() -> None:
    batch, count = codec.record_batch()
    assert len(batch) <= 1 << 20 and len(batch) > (1 << 20) - 300
    assert int.from_bytes(batch[57:61], "big") == count  # v2 header: record count at byte 57


def test_cli_quick_codec_section(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "codec", "--quick", "--runs", "2",
         "--min-time", "0.005", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "load average" in proc.stdout and "kafka-python" in proc.stdout
    report = json.loads(out.read_text())
    assert {"python", "cpu", "loadavg"} <= report["environment"].keys()
    results = report["results"]
    whats = {r["what"] for r in results}
    for name in ("VoteRequest v2", "DescribeQuorumResponse v2", "FetchResponse v17"):
        assert {f"{name} encode", f"{name} decode"} <= whats
    for r in results:
        assert r["section"] == "codec" and r["unit"] == "msg/s"
        for key in ("kwire", "reference", "kwire_best", "reference_best", "ratio"):
            assert isinstance(r[key], float) and math.isfinite(r[key]) and r[key] > 0
        assert r["kwire_best"] >= r["kwire"] and r["reference_best"] >= r["reference"]
        assert r["bytes_per_op"] > 0 and "bytes identical" in r["conditions"]
        assert len(r["extra"]["kwire_ns"]) == 2 == len(r["extra"]["reference_ns"])


def test_codec_floor_prototypes_agree_with_generated_codecs() -> None:
    from argparse import Namespace

    from tools.bench import codec_floor

    results = codec_floor.run(Namespace(quick=True, runs=1, min_time=0.001))
    assert [r.what for r in results] == [
        "VoteRequest v2 decode", "DescribeQuorumResponse v2 decode",
        "FetchResponse v17 encode", "FetchResponse v17 decode"]
    assert all(r.reference_name == codec_floor.REFERENCE and r.ratio for r in results)
