"""``kwire.unsafe.test.fsync.interval.ms``, the test-only switch the fault tests' positive control
sets (compat/test_disk_faults.py): the log counts everything written as durable and fsyncs at
most once per interval. Unset, every flush fsyncs and only fsynced offsets count."""

from __future__ import annotations

from pathlib import Path

import pytest

import storage.fileio
from server.config import ConfigError, load_config
from server.storage_raft_log import StorageRaftLog
from storage.log import MetadataLog
from tests.storage.helpers import data_batch

REPO = Path(__file__).resolve().parents[2]


def test_the_key_is_unset_by_default_and_checked() -> None:
    assert load_config(REPO / "config" / "server.properties").unsafe_test_fsync_interval_ms is None
    config = load_config(REPO / "config" / "server.properties", ["kwire.unsafe.test.fsync.interval.ms=1000"])
    assert config.unsafe_test_fsync_interval_ms == 1000
    with pytest.raises(ConfigError):
        load_config(REPO / "config" / "server.properties", ["kwire.unsafe.test.fsync.interval.ms=0"])


def test_the_ack_on_append_switch_is_off_by_default_and_reaches_the_controller() -> None:
    """``kwire.unsafe.test.ack.on.append`` (compat/test_quorum_faults.py's positive control)."""
    from server.node.startup import controller_config

    default = load_config(REPO / "config" / "server.properties")
    assert default.unsafe_test_ack_on_append is False
    assert controller_config(default, "c").unsafe_ack_on_append is False
    unsafe = load_config(REPO / "config" / "server.properties", ["kwire.unsafe.test.ack.on.append=true"])
    assert controller_config(unsafe, "c").unsafe_ack_on_append is True
    with pytest.raises(ConfigError):
        load_config(REPO / "config" / "server.properties", ["kwire.unsafe.test.ack.on.append=maybe"])


@pytest.mark.parametrize("interval_ms", [None, 3_600_000])
def test_what_counts_as_flushed(interval_ms: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs: list[int] = []
    monkeypatch.setattr(storage.fileio, "_fsync", fsyncs.append)
    with MetadataLog.open(tmp_path) as log:
        raft_log = StorageRaftLog(log, unsafe_fsync_interval_ms=interval_ms)
        raft_log.append(data_batch(0))
        raft_log.flush()  # the first flush fsyncs either way
        first = len(fsyncs)
        assert first >= 1 and raft_log.flushed_offset == 3
        raft_log.append(data_batch(3))
        raft_log.flush()
        if interval_ms is None:
            assert len(fsyncs) > first and log.flushed_offset == 6
        else:  # within the interval: no fsync, yet taken as durable
            assert len(fsyncs) == first and log.flushed_offset == 3
        assert raft_log.flushed_offset == 6
