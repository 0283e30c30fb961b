"""quorum-state: the exact JSON of both data versions, atomic replacement, strict reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from storage.errors import InconsistentStateError, KafkaStorageError
from storage.quorum_state import (
    FileQuorumStateStore,
    StoredElectionState,
    decode_quorum_state,
    encode_quorum_state,
)

DIR_ID = Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ")


def test_version_0_bytes() -> None:
    state = StoredElectionState(epoch=2, leader_id=1, voters=frozenset({3, 1, 2}))
    assert encode_quorum_state(state, 0) == (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert decode_quorum_state(encode_quorum_state(state, 0)) == (state, 0)


def test_version_1_bytes() -> None:
    voted = StoredElectionState(epoch=2, voted_id=1, voted_directory_id=DIR_ID)
    assert encode_quorum_state(voted, 1) == (
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ",'
        b'"data_version":1}'
    )
    assert decode_quorum_state(encode_quorum_state(voted, 1)) == (voted, 1)
    leader = StoredElectionState(epoch=7, leader_id=3)
    assert encode_quorum_state(leader, 1) == (
        b'{"leaderId":3,"leaderEpoch":7,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    # a vote without a directory id (kraft.version 1 voter key with no id known)
    plain = StoredElectionState(epoch=4, voted_id=2)
    assert decode_quorum_state(encode_quorum_state(plain, 1))[0] == plain
    with pytest.raises(ValueError):
        encode_quorum_state(plain, 2)


def test_reading_is_strict() -> None:
    good = b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    assert decode_quorum_state(good + b"\nignored second line")[0].voted_id == 1
    for bad in (
        b"",
        b"[1,2]",
        b"{not json",
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ"}',
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"data_version":1}',
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":2}',
        b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}',
    ):
        with pytest.raises(InconsistentStateError):
            decode_quorum_state(bad)


def test_store_writes_atomically(tmp_path: Path, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileQuorumStateStore.in_partition_dir(tmp_path)
    assert store.read_election_state() is None
    state = StoredElectionState(epoch=1, leader_id=1)
    store.write_election_state(state, 1)
    assert len(fsyncs) == 2  # the temporary file, then the directory
    assert store.read_election_state() == state and store.read_data_version() == 1
    assert os.listdir(tmp_path) == ["quorum-state"]
    assert not (tmp_path / "quorum-state").read_bytes().endswith(b"\n")

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("storage.fileio._fsync", eio)
    with pytest.raises(KafkaStorageError):
        store.write_election_state(StoredElectionState(epoch=2, voted_id=3), 1)
    # the old state stands and no temporary file is left behind
    assert store.read_election_state() == state
    assert os.listdir(tmp_path) == ["quorum-state"]
    store.clear()
    assert store.read_election_state() is None
