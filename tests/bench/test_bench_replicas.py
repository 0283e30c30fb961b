"""Smoke test of the ``replicas`` bench section on a few MiB: the generated directories are
what stock brokers leave (the audit finds them clean and reads every batch written, records
decoded; segments cut through their indexes; three leader epochs per partition) and the
one-process run reports a peak RSS; in ``make nightly`` (``KWIRE_STANDALONE_SPARK=1``) the
pyspark install's own standalone master and worker start and run the audit too. Figures are
never asserted on: benchmarks are not tests.

Cost: a few seconds; the standalone run about 25 s alone, 40-60 s on a loaded machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.leader_epoch import decode_checkpoint
from tools.audit.broker_dirs import classify_dirs, segment_paths
from tools.audit.history import read_history
from tools.audit.replicas import audit_replicas
from tools.audit.scan import segment_cuts
from tools.bench import replicas

pytestmark = pytest.mark.spark


def test_generated_directories_audit_clean(tmp_path: Path) -> None:
    data = replicas.generate(tmp_path / "data", 6 << 20, partitions=10)
    dirs = classify_dirs(data["dirs"])
    assert [d.broker for d in dirs] == [True] * 3 and dirs[0].metadata_dir == data["metadata"]
    result = audit_replicas(dirs, read_history(data["metadata"]), deep=True)  # every codec, markers decoded
    assert result.ok and not result.findings and len(result.partitions) == 10
    assert result.batches == data["batches"] and result.bytes_read == data["bytes"]
    big = Path(data["dirs"][1]) / "big-0"
    assert [e.epoch for e in decode_checkpoint((big / "leader-epoch-checkpoint").read_bytes())] == [0, 1, 2]
    [segment] = segment_paths(str(big))
    assert len(segment_cuts(segment, 0, os.path.getsize(segment), 16 << 10)) > 4  # index entries at batch starts

    one = replicas.audit_once(data, None)
    assert one["max_rss_kib"] > 0 and one["bytes"] == data["bytes"]
    assert replicas.audit_once(data, None, deep=True)["bytes"] == data["bytes"]


@pytest.mark.skipif(not os.environ.get("KWIRE_STANDALONE_SPARK"),
                    reason="make nightly: a standalone Spark master and worker (about 40 s on a loaded machine)")
def test_the_audit_runs_on_a_standalone_cluster(tmp_path: Path) -> None:
    data = replicas.generate(tmp_path / "data", 2 << 20, partitions=5)
    with replicas.Standalone(tmp_path / "spark", workers=1) as cluster:
        assert cluster.alive_workers() == 1
        spread = replicas.audit_once(data, cluster.master)
    assert spread["bytes"] == data["bytes"]  # audit_once checked it clean, every batch read


def test_sizes_parse() -> None:
    assert replicas.parse_sizes("1G,10G,512M,4096") == (1 << 30, 10 << 30, 512 << 20, 4096)
    assert replicas.parse_sizes(None) == ()
