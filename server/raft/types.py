"""Value types of the KRaft core, in Kafka's vocabulary.

Mirrors ``org.apache.kafka.raft``: ``ReplicaKey``, ``OffsetAndEpoch``, ``LeaderAndEpoch``,
``VoterSet`` (with ``VoterNode``), ``ElectionState`` and ``QuorumConfig``'s defaults
(``raft/src/main/java/org/apache/kafka/raft/QuorumConfig.java``). All immutable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kwire.topics import METADATA_PARTITION as METADATA_PARTITION
from kwire.topics import METADATA_TOPIC_NAME as METADATA_TOPIC_NAME
from kwire.uuid import ZERO_UUID, Uuid
from storage.snapshot_format import BOOTSTRAP_SNAPSHOT_ID as _BOOTSTRAP_SNAPSHOT

# KafkaRaftClient's constants of these names (ELECTION_BACKOFF_BASE_MS is its RETRY_BACKOFF_BASE_MS)
# and LeaderState's (OBSERVER_SESSION_TIMEOUT_MS, CHECK_QUORUM_TIMEOUT_FACTOR)
MAX_FETCH_WAIT_MS = 500
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024
OBSERVER_SESSION_TIMEOUT_MS = 300_000
ELECTION_BACKOFF_BASE_MS = 100
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
FETCH_TIMEOUT_SPREAD = 10
"""kwire's own: a follower's fetch timeout ends at a random point of a window
1/FETCH_TIMEOUT_SPREAD of ``controller.quorum.fetch.timeout.ms`` wide, centred on the timeout
(``QuorumState.fetch_deadline``)."""


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A replica's identity: node id plus, under KIP-853, its metadata directory id.

    ``directory_id`` is None when unknown (Kafka maps the zero UUID to empty).
    """

    id: int
    directory_id: Uuid | None = None

    @staticmethod
    def of(replica_id: int, directory_id: Uuid | None) -> ReplicaKey:
        """Build a key, mapping the zero UUID to "no directory id"."""
        if directory_id is None or directory_id == ZERO_UUID:
            return ReplicaKey(replica_id, None)
        return ReplicaKey(replica_id, directory_id)

    @property
    def directory_id_or_zero(self) -> Uuid:
        """The directory id as the wire carries it: the zero UUID when unknown."""
        return ZERO_UUID if self.directory_id is None else self.directory_id

    def __str__(self) -> str:
        """Kafka's ``ReplicaKey.toString``, which the voter-change errors quote:
        ``ReplicaKey(id=2, directoryId=<base64 uuid>)``, ``<undefined>`` for no directory id."""
        directory = "<undefined>" if self.directory_id is None else str(self.directory_id)
        return f"ReplicaKey(id={self.id}, directoryId={directory})"

    def matches(self, other: ReplicaKey) -> bool:
        """Same id and, when both sides know one, the same directory id (``VoterSet.isVoter``)."""
        if self.id != other.id:
            return False
        if self.directory_id is None or other.directory_id is None:
            return True
        return self.directory_id == other.directory_id


class OffsetAndEpoch(NamedTuple):
    """An offset and the epoch of the record before it. Ordered epoch first, then offset, as
    ``OffsetAndEpoch.compareTo``."""

    offset: int
    epoch: int

    def key(self) -> tuple[int, int]:
        """``(epoch, offset)``: the sort key of Kafka's epoch-first order."""
        return (self.epoch, self.offset)

    def at_least(self, other: OffsetAndEpoch) -> bool:
        """``self >= other`` in Kafka's epoch-first order."""
        return self.key() >= other.key()


BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(_BOOTSTRAP_SNAPSHOT.end_offset, _BOOTSTRAP_SNAPSHOT.epoch)
"""``storage.snapshot_format.BOOTSTRAP_SNAPSHOT_ID`` as the core's ``OffsetAndEpoch``: the
bootstrap checkpoint ``00000000000000000000-0000000000.checkpoint`` that ``kafka-storage
format`` writes, never loaded as a state-machine snapshot."""


class LeaderAndEpoch(NamedTuple):
    """The leader a replica knows of (None: unknown) in a leader epoch (``LeaderAndEpoch``)."""

    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener endpoint ``name://host:port`` (a VotersRecord Endpoint)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    """One voter: its key, listener endpoints and supported kraft.version range."""

    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()
    supported_kraft_versions: tuple[int, int] = (0, 0)

    def endpoint(self, listener: str) -> Endpoint | None:
        """The voter's endpoint on the listener named ``listener``, or None if it has none."""
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint
        return None


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters of the quorum, by id (``VoterSet``). Immutable; changes return a new set."""

    voters: tuple[VoterNode, ...]

    def __post_init__(self) -> None:
        ids = [voter.key.id for voter in self.voters]
        if len(ids) != len(set(ids)):
            raise ValueError(f"voter ids must be unique: {ids}")

    @staticmethod
    def static(
        voters: dict[int, tuple[str, int]], listener: str = "CONTROLLER"
    ) -> VoterSet:
        """The kraft.version 0 set from ``controller.quorum.voters`` (no directory ids,
        supported kraft versions [0, 0], endpoint named after the default listener)."""
        return VoterSet(
            tuple(
                VoterNode(ReplicaKey(voter_id), (Endpoint(listener, host, port),), (0, 0))
                for voter_id, (host, port) in sorted(voters.items())
            )
        )

    @property
    def ids(self) -> frozenset[int]:
        """The voters' node ids."""
        return frozenset(voter.key.id for voter in self.voters)

    @property
    def size(self) -> int:
        """The number of voters."""
        return len(self.voters)

    @property
    def majority_size(self) -> int:
        """Votes (or acknowledged replicas) that make a majority: ``size // 2 + 1``."""
        return len(self.voters) // 2 + 1

    def keys_text(self) -> str:
        """The voters' replica keys as Kafka's voter-change errors print ``VoterSet.voterKeys()``:
        ``[ReplicaKey(id=1, directoryId=...), ...]``. Kafka's set is ``Set.of``, whose
        iteration order is salted anew in every JVM; kwire lists them by id."""
        return "[" + ", ".join(str(key) for key in sorted((v.key for v in self.voters), key=lambda k: k.id)) + "]"

    def get(self, voter_id: int) -> VoterNode | None:
        """The voter with node id ``voter_id`` (whatever its directory id), or None."""
        for voter in self.voters:
            if voter.key.id == voter_id:
                return voter
        return None

    def is_voter(self, key: ReplicaKey) -> bool:
        """True if ``key`` is a voter: same id and, if both know it, the same directory id."""
        voter = self.get(key.id)
        return voter is not None and voter.key.matches(key)

    def is_only_voter(self, key: ReplicaKey) -> bool:
        """True if ``key`` is the one voter of a single-voter set (``VoterSet.isOnlyVoter``)."""
        return self.size == 1 and self.is_voter(key)

    def add_voter(self, voter: VoterNode) -> VoterSet | None:
        """A new set with ``voter`` added, or None if its id is already a voter."""
        if self.get(voter.key.id) is not None:
            return None
        return VoterSet(self.voters + (voter,))

    def remove_voter(self, key: ReplicaKey) -> VoterSet | None:
        """A new set without ``key``, or None if it is not a voter or would leave none."""
        voter = self.get(key.id)
        if voter is None or voter.key != key or self.size == 1:
            return None
        return VoterSet(tuple(v for v in self.voters if v.key.id != key.id))

    def update_voter(self, voter: VoterNode, *, ignoring_directory_id: bool = False) -> VoterSet | None:
        """A new set with ``voter`` replacing the voter with the same replica key (KIP-853
        UpdateRaftVoter), or None if no voter has that exact key. ``ignoring_directory_id``
        matches by id alone and takes ``voter``'s directory id (a static quorum's voters have
        none; ``VoterSet.updateVoterIgnoringDirectoryId``)."""
        current = self.get(voter.key.id)
        if current is None or (current.key != voter.key and not ignoring_directory_id):
            return None
        return VoterSet(tuple(voter if v.key.id == voter.key.id else v for v in self.voters))


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What quorum-state holds (``ElectionState``): the epoch, the known leader and the vote.

    At most one of ``leader_id`` and ``voted_key`` describes this epoch's decision; a node may
    know a leader after voting (Kafka keeps both). Persisted durably on every change.
    """

    epoch: int
    leader_id: int | None = None
    voted_key: ReplicaKey | None = None


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """The ``controller.quorum.*`` settings (``QuorumConfig``), defaults as Kafka's."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25
    """How long the leader lets appended records gather into one batch."""
    max_batch_size_bytes: int = 8 * 1024 * 1024
    """The largest batch the leader builds, and so the largest append it accepts
    (``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``; Kafka 4.x's testing key
    ``internal.metadata.max.batch.size.in.bytes``)."""
    pre_vote: bool = True
    """Run a KIP-996 pre-vote (Prospective role) before bumping the epoch (Kafka 4.0+)."""
    auto_join: bool = False
    """``controller.quorum.auto.join.enable`` (Kafka 4.x): an observer controller of a dynamic
    quorum asks the leader to make it a voter, removing an old replica key with its id first."""


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """Who this core is: node id, directory id, endpoints, and the cluster it belongs to."""

    node_id: int
    directory_id: Uuid = ZERO_UUID
    cluster_id: str | None = None
    endpoints: tuple[Endpoint, ...] = field(default_factory=tuple)
    supported_kraft_versions: tuple[int, int] = (0, 1)

    @property
    def key(self) -> ReplicaKey:
        """``(node id, directory id)``; the directory id is None when unset (zero)."""
        return ReplicaKey.of(self.node_id, self.directory_id)

    @property
    def default_listener(self) -> str:
        """The first controller listener's name (``controller.listener.names``)."""
        return self.endpoints[0].name if self.endpoints else "CONTROLLER"

    def validate_cluster_id(self, cluster_id: str | None) -> bool:
        """``KafkaRaftClient.hasValidClusterId``: a null id on either side skips the check."""
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id
