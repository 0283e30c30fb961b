"""The six roles of a KRaft replica and the table of legal transitions between them.

One class per role, as Kafka's ``EpochState`` implementations (``UnattachedState``,
``ProspectiveState``, ``CandidateState``, ``LeaderState``, ``FollowerState``,
``ResignedState``). Each holds its epoch, its timers (absolute deadlines in ms) and answers
``can_grant_vote``. The core (``server.raft.core``) performs every transition through
``RaftCore.transition``, which checks :data:`TRANSITIONS` and that the epoch never decreases.

Transitions (trigger in brackets; "higher epoch" = a request or response from a later epoch):

* Unattached -> Unattached [higher epoch; granting a vote], Prospective [election timeout, voter,
  pre-vote on], Candidate [election timeout, pre-vote off or single voter], Follower [a leader
  of this or a later epoch is learned].
* Prospective -> Unattached [higher epoch; granting a vote], Prospective [pre-vote lost or timed
  out, retry after backoff], Candidate [a majority granted the pre-vote], Follower [a leader is
  learned; or the pre-vote is lost while the leader it last followed is known: back to it].
* Candidate -> Unattached [higher epoch], Prospective [election lost or timed out, pre-vote on],
  Candidate [same, pre-vote off], Leader [a majority granted the vote], Follower [a leader of this
  or a later epoch is learned].
* Leader -> Unattached [higher epoch, leader unknown], Follower [higher epoch with a known
  leader], Resigned [graceful shutdown, or check-quorum: no majority fetched within 1.5 x
  fetch.timeout.ms].
* Follower -> Unattached [higher epoch, leader unknown; an observer whose fetch timed out],
  Prospective / Candidate [fetch timeout, voter], Follower [a later epoch's leader].
* Resigned -> Unattached [higher epoch; a leader that removed itself, at its election
  timeout], Prospective / Candidate [election timeout], Follower [a later epoch's leader].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from server.raft.accumulator import MAX_BATCH_SIZE_BYTES, BatchAccumulator
from server.raft.types import ElectionState, OffsetAndEpoch, ReplicaKey, VoterSet


class EpochState:
    """Base of the roles: the epoch and the durable election state it implies."""

    name = "Base"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def election(self) -> ElectionState:
        """The :class:`ElectionState` this role stands for, which quorum-state persists
        (``EpochState.election``)."""
        raise NotImplementedError

    @property
    def leader_id(self) -> int | None:
        """The leader known in this epoch, or None."""
        return None

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Whether this role may grant ``candidate`` a vote (or a pre-vote) in its epoch."""
        raise NotImplementedError

    def deadlines(self) -> list[int]:
        """This role's timers (absolute ms): the core polls again at the earliest one."""
        return []

    def __repr__(self) -> str:
        return f"{self.name}(epoch={self.epoch})"


def _same_vote(voted: ReplicaKey, candidate: ReplicaKey) -> bool:
    """Whether a vote already cast for ``voted`` covers ``candidate``: the same id, and the same
    directory id unless the vote recorded none."""
    return voted.id == candidate.id and (
        voted.directory_id is None or voted.directory_id == candidate.directory_id
    )


class Unattached(EpochState):
    """No leader known in ``epoch``; possibly voted for ``voted_key``."""

    name = "Unattached"

    def __init__(
        self, epoch: int, election_deadline_ms: int | None, voted_key: ReplicaKey | None = None
    ) -> None:
        super().__init__(epoch)
        self.voted_key = voted_key
        self.election_deadline_ms = election_deadline_ms
        """None for observers, which never start elections."""

    def election(self) -> ElectionState:
        """This epoch, no leader, and the vote cast in it if any."""
        return ElectionState(self.epoch, None, self.voted_key)

    def deadlines(self) -> list[int]:
        """The election timeout; none for an observer."""
        return [] if self.election_deadline_ms is None else [self.election_deadline_ms]

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """A pre-vote to an up-to-date log; a vote to the key already voted for or, not having
        voted, to an up-to-date log (``UnattachedState.canGrantVote``)."""
        if pre_vote:
            return log_up_to_date
        if self.voted_key is not None:
            return _same_vote(self.voted_key, candidate)
        return log_up_to_date


@dataclass(slots=True)
class _Election:
    """Votes gathered by a Prospective or Candidate (``EpochElection``)."""

    voters: VoterSet
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    def is_won(self) -> bool:
        return len(self.granted) >= self.voters.majority_size

    def is_lost(self) -> bool:
        return len(self.rejected) > self.voters.size - self.voters.majority_size

    def unrecorded(self) -> list[int]:
        return sorted(self.voters.ids - self.granted - self.rejected)


class Prospective(EpochState):
    """Running a KIP-996 pre-vote for ``epoch + 1`` without bumping the epoch."""

    name = "Prospective"

    def __init__(
        self,
        epoch: int,
        voters: VoterSet,
        local_id: int,
        election_deadline_ms: int,
        retries: int,
        voted_key: ReplicaKey | None = None,
        leader_id: int | None = None,
    ) -> None:
        super().__init__(epoch)
        self.votes = _Election(voters, granted={local_id})
        self.election_deadline_ms = election_deadline_ms
        self.backoff_until_ms: int | None = None
        self.retries = retries
        self.voted_key = voted_key
        self._leader_id = leader_id
        """The leader it followed before its fetch timed out, if any: learning about that same
        leader again does not send it back; losing the pre-vote does (KIP-996)."""

    def election(self) -> ElectionState:
        """This epoch, the leader followed before the fetch timed out (if any) and the vote cast
        in this epoch (if any): a pre-vote changes nothing durable."""
        return ElectionState(self.epoch, self._leader_id, self.voted_key)

    def deadlines(self) -> list[int]:
        """The pre-vote's election timeout and, after it was lost or timed out, the end of its
        backoff."""
        return [self.election_deadline_ms] + ([] if self.backoff_until_ms is None else [self.backoff_until_ms])

    @property
    def leader_id(self) -> int | None:
        """The leader it followed before its fetch timed out, if any (KIP-996)."""
        return self._leader_id

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """The rule of :class:`Unattached`, except that a Prospective that still knows the
        leader it followed refuses a real vote it has not already given
        (``QuorumState.unattachedOrProspectiveCanGrantVote``)."""
        if pre_vote:
            return log_up_to_date
        if self.voted_key is not None:
            return _same_vote(self.voted_key, candidate)
        if self._leader_id is not None:
            return False
        return log_up_to_date


class Candidate(EpochState):
    """Voted for itself in ``epoch`` and asks the other voters (``CandidateState``)."""

    name = "Candidate"

    def __init__(
        self,
        epoch: int,
        local_key: ReplicaKey,
        voters: VoterSet,
        election_deadline_ms: int,
        retries: int,
    ) -> None:
        super().__init__(epoch)
        self.local_key = local_key
        self.votes = _Election(voters, granted={local_key.id})
        self.election_deadline_ms = election_deadline_ms
        self.backoff_until_ms: int | None = None
        self.retries = retries

    def election(self) -> ElectionState:
        """This epoch, no leader, and the vote for itself."""
        return ElectionState(self.epoch, None, self.local_key)

    def deadlines(self) -> list[int]:
        """The election timeout and, after the election was lost or timed out, the end of its
        backoff."""
        return [self.election_deadline_ms] + ([] if self.backoff_until_ms is None else [self.backoff_until_ms])

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Only a pre-vote, to an up-to-date log: its vote went to itself
        (``CandidateState.canGrantVote``)."""
        return pre_vote and log_up_to_date


@dataclass(slots=True)
class ReplicaState:
    """What a leader knows about one replica (``LeaderState.ReplicaState``)."""

    key: ReplicaKey
    end_offset: int | None = None
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end_offset: int = -1

    def update_follower(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """``ReplicaState.updateFollowerState``: caught up when its fetch reached the leader's
        end offset at this fetch, or at the previous one."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.last_fetch_leader_end_offset > 0 and fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms
        self.end_offset = fetch_offset


def _matches_key(state_key: ReplicaKey, key: ReplicaKey) -> bool:
    """``ReplicaState.matchesKey``: same id, and the same directory id unless the state has
    none (a static voter's)."""
    return state_key.id == key.id and (state_key.directory_id is None or state_key.directory_id == key.directory_id)


@dataclass(slots=True)
class ParkedFetch:
    """A Fetch held in the leader's purgatory until the log end offset passes ``fetch_offset``,
    the high watermark passes ``high_watermark`` (the leader's when it was parked: Kafka 4.x
    completes every parked fetch when the high watermark moves, KIP-1166) or ``expires_ms``
    (``ThresholdPurgatory``)."""

    request_id: int
    api_version: int
    request: object
    listener: str
    fetch_offset: int
    expires_ms: int
    high_watermark: int = -1


class VoterChangeKind(StrEnum):
    """Which admin RPC a pending voter change answers."""

    ADD = "add"
    REMOVE = "remove"


@dataclass(slots=True)
class PendingVoterChange:
    """The one Add/RemoveRaftVoter a leader is working on (``AddVoterHandler`` /
    ``RemoveVoterHandler``): waiting for the new voter's ApiVersions (``api_versions_correlation``
    set), then for the VotersRecord at ``record_offset`` to commit."""

    kind: VoterChangeKind
    request_id: int
    response_factory: object
    deadline_ms: int
    new_voters: VoterSet | None = None
    new_voter_key: ReplicaKey | None = None
    api_versions_correlation: int | None = None
    record_offset: int | None = None
    ack_when_committed: bool = True


class Leader(EpochState):
    """Leader of ``epoch`` (``LeaderState``): replica progress, high watermark, check-quorum."""

    name = "Leader"

    def __init__(
        self,
        epoch: int,
        local_key: ReplicaKey,
        voters: VoterSet,
        epoch_start_offset: int,
        granting: set[int],
        now_ms: int,
        check_quorum_timeout_ms: int,
        append_linger_ms: int = 0,
        max_batch_bytes: int = MAX_BATCH_SIZE_BYTES,
    ) -> None:
        super().__init__(epoch)
        self.local_key = local_key
        self.accumulator = BatchAccumulator(epoch, append_linger_ms, max_batch_bytes)
        """The local state machine's records lingering before they become a batch."""
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.granting = set(granting)
        self.high_watermark: int | None = None
        self.voter_states: dict[int, ReplicaState] = {
            v.key.id: ReplicaState(v.key) for v in voters.voters
        }
        self.observer_states: dict[ReplicaKey, ReplicaState] = {}
        self.next_begin_epoch_ms: dict[int, int] = {
            v: now_ms for v in voters.ids if v != local_key.id
        }
        self.check_quorum_timeout_ms = check_quorum_timeout_ms
        self.check_quorum_deadline_ms = now_ms + check_quorum_timeout_ms
        self.fetched_voters: set[int] = set()
        self.parked: list[ParkedFetch] = []
        self.pending_voter_change: PendingVoterChange | None = None
        self.volatile_voters: VoterSet | None = None
        """kraft.version 0: the voters as their UpdateRaftVoter requests describe them (ids,
        directory ids, endpoints, supported kraft.version ranges), kept in memory only
        (``LeaderState.volatileVoters``, Kafka 4.1+), this leader's own entry set when it
        became leader; None at kraft.version 1."""
        self.requested_kraft_version: int | None = None
        """The kraft.version this leader appended an upgrade to (``LeaderState
        .requestedKRaftVersion``); None when none is pending."""
        self.resign_when_committed: int | None = None
        """Offset of a VotersRecord that removed this leader: it resigns once it commits."""

    def set_voters(self, voters: VoterSet, now_ms: int) -> None:
        """Track a new voter set (uncommitted ones included, as ``LeaderState.updateLocalState``):
        new voters start unknown (an observer's progress carries over), removed ones become
        observers with their progress (so a removed voter that still fetches can be added back
        at once, as ``LeaderState.updateVoterAndObserverStates``), and a kept voter takes the
        set's replica key (``ReplicaState.setReplicaKey``)."""
        states: dict[int, ReplicaState] = {}
        removed = dict(self.voter_states)
        for voter in voters.voters:
            old = self.voter_states.get(voter.key.id)
            if old is None or not _matches_key(old.key, voter.key):
                old = self.observer_states.get(voter.key) or ReplicaState(voter.key)
            removed.pop(voter.key.id, None)
            self.observer_states.pop(voter.key, None)
            old.key = voter.key  # a static voter's entry gains its directory id
            states[voter.key.id] = old
        self.voter_states = states
        for state in removed.values():
            self.observer_states.setdefault(state.key, state)
        if self.voters.majority_size <= 1 < voters.majority_size:
            # the check-quorum timer ran idle while this leader was alone: it starts now
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms
        self.voters = voters
        self.next_begin_epoch_ms = {
            v: self.next_begin_epoch_ms.get(v, now_ms) for v in voters.ids if v != self.local_key.id
        }
        self.fetched_voters &= voters.ids

    def election(self) -> ElectionState:
        """This epoch, itself as leader, and its vote for itself."""
        return ElectionState(self.epoch, self.local_key.id, self.local_key)

    def deadlines(self) -> list[int]:
        """The check-quorum expiry (with two or more voters), each voter's next BeginQuorumEpoch,
        the expiry of each parked Fetch and the lingering batch's deadline."""
        deadlines = [self.check_quorum_deadline_ms] if self.voters.majority_size > 1 else []
        deadlines.extend(self.next_begin_epoch_ms.values())
        deadlines.extend(p.expires_ms for p in self.parked)
        if self.accumulator.deadline_ms is not None:
            deadlines.append(self.accumulator.deadline_ms)
        return deadlines

    @property
    def leader_id(self) -> int | None:
        """This replica's id."""
        return self.local_key.id

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Never, not even a pre-vote (``LeaderState.canGrantVote``)."""
        return False

    def record_voter_fetch(self, voter_id: int, now_ms: int) -> None:
        """Check-quorum bookkeeping (``LeaderState.updateCheckQuorumForFollowingVoter``)."""
        if voter_id == self.local_key.id:
            return
        self.fetched_voters.add(voter_id)
        counted = len(self.fetched_voters) + (1 if self.local_key.id in self.voters.ids else 0)
        if counted >= self.voters.majority_size:
            self.fetched_voters.clear()
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def check_quorum_expired(self, now_ms: int) -> bool:
        """True once no majority of voters has fetched within the check-quorum timeout (1.5 x
        ``fetch.timeout.ms``); never with a single voter, whose timer restarts at every poll
        (``LeaderState.timeUntilCheckQuorumExpires``)."""
        if self.voters.majority_size <= 1:
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms
            return False
        return now_ms >= self.check_quorum_deadline_ms

    def update_local_end_offset(self, end_offset: int, now_ms: int) -> None:
        """Record the leader's own (flushed) log end offset at ``now_ms``: it counts toward the
        high watermark like a voter's fetch offset (``LeaderState.updateLocalState``). Ignored
        when the leader is not a voter."""
        state = self.voter_states.get(self.local_key.id)
        if state is not None:
            state.end_offset = end_offset
            state.last_fetch_ms = now_ms
            state.last_caught_up_ms = now_ms

    def maybe_advance_high_watermark(self) -> int | None:
        """Recompute the high watermark (``LeaderState.maybeUpdateHighWatermark``): the end
        offset of the ``voters/2``-th voter sorted descending (unknown last), accepted only past
        the epoch start offset and only if it grows. Returns the new value, or None."""
        offsets = sorted(
            (s.end_offset if s.end_offset is not None else -1 for s in self.voter_states.values()),
            reverse=True,
        )
        candidate = offsets[len(offsets) // 2]
        if candidate <= self.epoch_start_offset:
            return None
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return None
        self.high_watermark = candidate
        return candidate

    def preferred_successors(self) -> list[ReplicaKey]:
        """Other voters by descending end offset (``LeaderState.nonLeaderVotersByDescendingFetchOffset``)."""
        others = [s for vid, s in self.voter_states.items() if vid != self.local_key.id]
        others.sort(key=lambda s: s.end_offset if s.end_offset is not None else -1, reverse=True)
        return [s.key for s in others]


@dataclass(slots=True)
class SnapshotDownload:
    """A snapshot being fetched with FetchSnapshot (Kafka's ``.checkpoint.part``)."""

    snapshot_id: OffsetAndEpoch
    data: bytearray = field(default_factory=bytearray)
    size: int | None = None


class Follower(EpochState):
    """Following ``leader_id`` in ``epoch`` (``FollowerState``)."""

    name = "Follower"

    def __init__(
        self, epoch: int, leader_id: int, fetch_deadline_ms: int, voted_key: ReplicaKey | None
    ) -> None:
        super().__init__(epoch)
        self._leader_id = leader_id
        self.fetch_deadline_ms = fetch_deadline_ms
        self.voted_key = voted_key
        self.has_fetched = False
        self.backoff_until_ms: int | None = None
        self.snapshot_download: SnapshotDownload | None = None
        self.update_voter_due_ms = 0
        """When this voter may next send UpdateRaftVoter (every 3 x fetch.timeout.ms)."""
        self.has_updated_leader = False
        """kraft.version 0: this leader answered an UpdateRaftVoter with NONE or
        UNSUPPORTED_VERSION, so it holds this voter's directory id and endpoints in memory
        (``FollowerState.hasUpdatedLeader``)."""
        self.auto_join_due_ms: int | None = None
        """When this observer may next ask to join (``controller.quorum.auto.join.enable``):
        one fetch timeout after it started following, then after each attempt
        (``FollowerState.updateVoterSetPeriodTimer``); None until first polled."""

    def election(self) -> ElectionState:
        """This epoch, the leader followed, and the vote cast in this epoch if any."""
        return ElectionState(self.epoch, self._leader_id, self.voted_key)

    def deadlines(self) -> list[int]:
        """The fetch timeout and, after a failed Fetch, the end of the retry backoff."""
        return [self.fetch_deadline_ms] + ([] if self.backoff_until_ms is None else [self.backoff_until_ms])

    @property
    def leader_id(self) -> int | None:
        """The leader being followed."""
        return self._leader_id

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Never a vote; a pre-vote to an up-to-date log only while it has not fetched from its
        leader in this epoch (``FollowerState.canGrantVote``, KIP-996)."""
        return pre_vote and not self.has_fetched and log_up_to_date


class Resigned(EpochState):
    """A former leader of ``epoch`` that gave up (``ResignedState``): it tells the other voters
    with EndQuorumEpoch until each acknowledges, and waits for an election."""

    name = "Resigned"

    def __init__(
        self,
        epoch: int,
        local_key: ReplicaKey,
        unacknowledged: set[int],
        election_deadline_ms: int,
        preferred_successors: list[ReplicaKey],
    ) -> None:
        super().__init__(epoch)
        self.local_key = local_key
        self.unacknowledged = set(unacknowledged)
        self.election_deadline_ms = election_deadline_ms
        self.preferred_successors = preferred_successors

    def election(self) -> ElectionState:
        """This epoch and itself as leader, as while it led."""
        return ElectionState(self.epoch, self.local_key.id, self.local_key)

    def deadlines(self) -> list[int]:
        """The election timeout."""
        return [self.election_deadline_ms]

    @property
    def leader_id(self) -> int | None:
        """Its own id: it led this epoch."""
        return self.local_key.id

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Only a pre-vote, to an up-to-date log (``ResignedState.canGrantVote``)."""
        return pre_vote and log_up_to_date


ROLES: tuple[type[EpochState], ...] = (
    Unattached,
    Prospective,
    Candidate,
    Leader,
    Follower,
    Resigned,
)

TRANSITIONS: dict[type[EpochState], frozenset[type[EpochState]]] = {
    Unattached: frozenset({Unattached, Prospective, Candidate, Follower}),
    Prospective: frozenset({Unattached, Prospective, Candidate, Follower}),
    Candidate: frozenset({Unattached, Prospective, Candidate, Leader, Follower}),
    Leader: frozenset({Unattached, Follower, Resigned}),
    Follower: frozenset({Unattached, Prospective, Candidate, Follower}),
    Resigned: frozenset({Unattached, Prospective, Candidate, Follower}),
}
"""Legal ``from -> to`` role changes; anything else is a bug (``IllegalStateException``)."""

SAME_EPOCH_ALLOWED: frozenset[tuple[type[EpochState], type[EpochState]]] = frozenset(
    {
        (Unattached, Unattached),  # granting a vote in the current epoch
        (Unattached, Prospective),
        (Unattached, Follower),
        (Prospective, Unattached),  # granting a vote in the current epoch
        (Prospective, Prospective),
        (Prospective, Follower),
        (Candidate, Prospective),  # election lost: pre-vote again, keeping the vote for self
        (Candidate, Leader),
        (Candidate, Follower),
        (Leader, Resigned),
        (Follower, Prospective),
        (Resigned, Prospective),
        (Follower, Unattached),  # an observer whose leader went silent
        (Resigned, Unattached),  # a leader that removed itself from the voters
    }
)
"""Role changes that may keep the epoch; every other legal change must raise it."""


SAME_EPOCH_REQUIRED: frozenset[tuple[type[EpochState], type[EpochState]]] = frozenset(
    {(Candidate, Leader), (Leader, Resigned)}
)
"""A leader leads the epoch it won; a resigned leader keeps the epoch it gave up."""


def transition_allowed(
    old: type[EpochState], new: type[EpochState], old_epoch: int, new_epoch: int
) -> bool:
    """True if a change from ``old`` in ``old_epoch`` to ``new`` in ``new_epoch`` is legal."""
    if new not in TRANSITIONS[old]:
        return False
    if new_epoch < old_epoch:
        return False
    if new is Candidate:
        return new_epoch == old_epoch + 1  # a candidate always bumps the epoch by one
    if (old, new) in SAME_EPOCH_REQUIRED:
        return new_epoch == old_epoch
    if new_epoch == old_epoch:
        return (old, new) in SAME_EPOCH_ALLOWED
    return True
