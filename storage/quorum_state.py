"""``quorum-state``: the durable election state of a KRaft node.

Mirrors ``org.apache.kafka.raft.FileQuorumStateStore`` and ``ElectionState``. One line of
compact JSON, no trailing newline: ``QuorumStateData`` in Kafka's JSON converter form at
``data_version`` (= the kraft.version in effect), followed by a ``data_version`` field::

    v0 {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
        "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
    v1 {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ",
        "data_version":1}

(wrapped here; the file is one line). Written as ``quorum-state.tmp``, fsync, rename over
``quorum-state``, fsync of the directory -- before any vote or BeginQuorumEpoch answer leaves.
Reading uses only the first line; every field of the version is mandatory.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.quorum_state_data import QuorumStateData
from messages.generated.quorum_state_data import Voter as QuorumStateVoter
from storage.errors import InconsistentStateError
from storage.fileio import atomic_write, io_errors

QUORUM_STATE_FILE = "quorum-state"
DATA_VERSION = "data_version"
LOWEST_SUPPORTED_VERSION = 0
HIGHEST_SUPPORTED_VERSION = 1
UNKNOWN_LEADER_ID = -1
NOT_VOTED = -1

_MANDATORY = {
    0: ("clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters"),
    1: ("leaderId", "leaderEpoch", "votedId", "votedDirectoryId"),
}


@dataclass(frozen=True, slots=True)
class StoredElectionState:
    """What ``quorum-state`` records (Kafka's ``ElectionState`` in its file form): the epoch,
    the known leader, the vote cast in that epoch (id and, with kraft.version 1, directory id),
    and for data_version 0 the static voter ids. The core's own view of the same state, with a
    replica key for the vote, is ``server.raft.types.ElectionState``; the node converts."""

    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    voted_directory_id: Uuid | None = None
    voters: frozenset[int] = field(default_factory=frozenset)

    def to_quorum_state_data(self, version: int) -> QuorumStateData:
        """The ``QuorumStateData`` message for ``version`` (``ElectionState.toQuorumStateData``):
        None ids become -1; version 0 carries the voter ids, version 1 the voted directory id
        (zero uuid when none). Raises ValueError for a version other than 0 or 1."""
        data = QuorumStateData(
            leader_epoch=self.epoch,
            leader_id=UNKNOWN_LEADER_ID if self.leader_id is None else self.leader_id,
            voted_id=NOT_VOTED if self.voted_id is None else self.voted_id,
        )
        if version == 0:
            data.current_voters = [QuorumStateVoter(voter_id=v) for v in sorted(self.voters)]
        elif version == 1:
            data.voted_directory_id = self.voted_directory_id or ZERO_UUID
        else:
            raise ValueError(f"File quorum state store doesn't handle supported version {version}")
        return data

    @classmethod
    def from_quorum_state_data(cls, data: QuorumStateData) -> StoredElectionState:
        """The inverse of :meth:`to_quorum_state_data` (``ElectionState.fromQuorumStateData``):
        leader and voted id -1 become None, a zero or absent voted directory id becomes None,
        and the directory id is dropped when there is no vote."""
        voted = data.voted_id != NOT_VOTED
        directory = data.voted_directory_id
        return cls(
            epoch=data.leader_epoch,
            leader_id=None if data.leader_id == UNKNOWN_LEADER_ID else data.leader_id,
            voted_id=data.voted_id if voted else None,
            voted_directory_id=directory if voted and directory != ZERO_UUID else None,
            voters=frozenset(v.voter_id for v in data.current_voters or []),
        )


def encode_quorum_state(state: StoredElectionState, data_version: int) -> bytes:
    """The file's exact bytes. Raises ValueError for an unsupported ``data_version``."""
    if not LOWEST_SUPPORTED_VERSION <= data_version <= HIGHEST_SUPPORTED_VERSION:
        raise ValueError(
            f"Quorum state data version ({data_version}) is greater than the supported version "
            f"({HIGHEST_SUPPORTED_VERSION})"
        )
    node: dict[str, Any] = state.to_quorum_state_data(data_version).to_json(data_version)
    node[DATA_VERSION] = data_version
    # Jackson's ObjectNode.toString(): no spaces, UTF-8 as is.
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_quorum_state(data: bytes, location: str = QUORUM_STATE_FILE) -> tuple[StoredElectionState, int]:
    """``(state, data_version)`` from the file's bytes (first line only). Raises
    InconsistentStateError when it is not valid."""
    first_line = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not first_line:
        raise InconsistentStateError(f"Error while reading the Quorum status from the file {location}: File ended prematurely.")
    try:
        node = json.loads(first_line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InconsistentStateError(f"{location} is not JSON: {exc}") from exc
    if not isinstance(node, dict):
        raise InconsistentStateError(f"Deserialized node {node!r} is not an object node")
    version = node.get(DATA_VERSION)
    if version is None:
        raise InconsistentStateError(f"Deserialized node {node!r} does not have {DATA_VERSION} field")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InconsistentStateError(f"{DATA_VERSION} is not a number in {location}")
    if not LOWEST_SUPPORTED_VERSION <= version <= HIGHEST_SUPPORTED_VERSION:
        raise InconsistentStateError(
            f"data_version ({version}) is not within the min ({LOWEST_SUPPORTED_VERSION}) and max "
            f"({HIGHEST_SUPPORTED_VERSION}) supported version"
        )
    for name in _MANDATORY[version]:
        if name not in node:
            raise InconsistentStateError(
                f"QuorumStateData: unable to locate field '{name}', which is mandatory in version {version}"
            )
    try:
        parsed = QuorumStateData.from_json(node, version)
    except (ValueError, TypeError, KeyError) as exc:
        raise InconsistentStateError(f"invalid quorum state in {location}: {exc}") from exc
    return StoredElectionState.from_quorum_state_data(parsed), version


class FileQuorumStateStore:
    """``<partition dir>/quorum-state`` (``org.apache.kafka.raft.FileQuorumStateStore``).

    Construction touches no file. Reads raise InconsistentStateError for a malformed file and
    KafkaStorageError on I/O failure."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def in_partition_dir(cls, partition_dir: str | os.PathLike[str]) -> FileQuorumStateStore:
        """The store of ``<partition_dir>/quorum-state`` (e.g. ``__cluster_metadata-0``)."""
        return cls(Path(partition_dir) / QUORUM_STATE_FILE)

    def read_election_state(self) -> StoredElectionState | None:
        """None when the file does not exist. Raises InconsistentStateError when it is
        malformed and KafkaStorageError on I/O failure."""
        with io_errors(f"reading {self.path}"):
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return None
        return decode_quorum_state(data, str(self.path))[0]

    def read_data_version(self) -> int | None:
        """The file's ``data_version`` (0 or 1), None when the file does not exist. Raises
        InconsistentStateError when it is malformed and KafkaStorageError on I/O failure."""
        with io_errors(f"reading {self.path}"):
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return None
        return decode_quorum_state(data, str(self.path))[1]

    def write_election_state(self, state: StoredElectionState, kraft_version: int) -> None:
        """Durably replace the file (data_version = ``kraft_version``). Raises
        KafkaStorageError; the caller must not act on the new state after that."""
        atomic_write(self.path, encode_quorum_state(state, kraft_version))

    def clear(self) -> None:
        """Delete ``quorum-state`` and ``quorum-state.tmp``; missing files are not an error
        (``FileQuorumStateStore.clear``). Raises KafkaStorageError."""
        for path in (self.path, self.path.with_name(self.path.name + ".tmp")):
            with io_errors(f"deleting {path}"), contextlib.suppress(FileNotFoundError):
                os.unlink(path)
