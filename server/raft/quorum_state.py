"""A replica's role in the current epoch and every change of it (Kafka's ``QuorumState``).

Holds the role object (``server.raft.roles``), the election state last handed out for
persisting, the election timers and the election retry count. Every role change goes through
:meth:`QuorumState.transition`, which checks :data:`~server.raft.roles.TRANSITIONS` and queues
the new election state for the Outbox whenever it differs from the persisted one (the driver
makes it durable before any message of that step leaves). Time is ``now_ms`` from the caller;
randomness comes from the injected ``random.Random``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from server.raft.accumulator import MAX_BATCH_SIZE_BYTES
from server.raft.control_state import ControlRecordStateMachine
from server.raft.roles import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    transition_allowed,
)
from server.raft.types import (
    CHECK_QUORUM_TIMEOUT_FACTOR,
    ELECTION_BACKOFF_BASE_MS,
    FETCH_TIMEOUT_SPREAD,
    ElectionState,
    LeaderAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    ReplicaKey,
    VoterSet,
)

if TYPE_CHECKING:
    import random


class IllegalTransitionError(AssertionError):
    """A role change that :data:`server.raft.roles.TRANSITIONS` does not allow."""


class RaftSafetyError(AssertionError):
    """The core was asked to do something that would break Raft safety (e.g. a leader telling
    it to truncate below its high watermark, or a second leader in an epoch). The node must
    stop."""


class NotInRoleError(RuntimeError):
    """A role-specific operation was asked of a replica in another role (a bug in the caller:
    the typed accessors raise this where an ``assert`` would vanish under ``python -O``)."""


class QuorumState:
    """The role, the persisted election and the election timers of one replica.

    ``on_transition(old)`` is called before each role change takes effect, while ``old`` is
    still the current role (the core answers a former leader's parked requests there).
    Raises :class:`IllegalTransitionError` for a change the table forbids and
    :class:`RaftSafetyError` for news of a second leader in the epoch this replica leads or
    follows.
    """

    def __init__(
        self,
        *,
        identity: ReplicaIdentity,
        control: ControlRecordStateMachine,
        config: QuorumConfig,
        rng: random.Random,
        election: ElectionState | None,
        log_epoch: int,
        now_ms: int,
        on_transition: Callable[[EpochState], None],
    ) -> None:
        self.identity = identity
        self.local_key = identity.key
        self._control = control
        self._config = config
        self._rng = rng
        self._on_transition = on_transition
        self.election_retries = 0
        self._persisted = election or ElectionState(0)
        self._unwritten: ElectionState | None = None
        self.state: EpochState = self._initial_state(self._persisted, log_epoch, now_ms)
        if election is None or self.state.election() != self._persisted:
            # written at start-up like QuorumState.initialize's durable transition
            self._unwritten = self.state.election()

    # ------------------------------------------------------------------ views

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.state.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        """The known leader (None if unknown) and the current epoch."""
        return LeaderAndEpoch(self.state.leader_id, self.state.epoch)

    @property
    def persisted_election(self) -> ElectionState:
        """The election state last handed to the driver for persisting."""
        return self._persisted

    @property
    def is_voter(self) -> bool:
        """True when the newest voter set holds this replica's key."""
        return self._control.voters.is_voter(self.local_key)

    def leader(self) -> Leader:
        """The Leader role; raises :class:`NotInRoleError` in any other role."""
        state = self.state
        if not isinstance(state, Leader):
            raise NotInRoleError(f"{state!r} is not the leader")
        return state

    def candidate(self) -> Candidate:
        """The Candidate role; raises :class:`NotInRoleError` in any other role."""
        state = self.state
        if not isinstance(state, Candidate):
            raise NotInRoleError(f"{state!r} is not a candidate")
        return state

    def take_unwritten_election(self) -> ElectionState | None:
        """The election state to persist in this step's Outbox (once), or None."""
        election, self._unwritten = self._unwritten, None
        return election

    # ------------------------------------------------------------------ timers

    def election_deadline(self, now_ms: int) -> int:
        """``QuorumState.randomElectionTimeoutMs``: T + rand[0, T) after ``now_ms``."""
        timeout = self._config.election_timeout_ms
        return now_ms + timeout + self._rng.randrange(timeout)

    def fetch_deadline(self, now_ms: int) -> int:
        """When a follower that fetched successfully at ``now_ms`` gives up on its leader: after
        ``fetch.timeout.ms`` T plus rand[-W, W] ms, W = T / (2 x FETCH_TIMEOUT_SPREAD) (100 ms of
        the default 2 s). Kafka's FollowerState waits exactly T; a deviation, for two races.

        Between two kwire followers: an idle leader answers its followers' parked Fetches
        together, so with an exact T both followers of a 3-voter quorum whose leader died would
        become Prospective within a millisecond or two, each before the other's PreVote comes
        (a Follower that has fetched in its epoch rejects one, KIP-996), grant each other's,
        and split the vote: an election timeout (1-2 s) more before either leads. With both
        deadlines drawn from a window of T / FETCH_TIMEOUT_SPREAD, they fall within the few
        ms a PreVote takes of each other only rarely; the first to time out is refused by the
        other, which times out next, has the first's pre-vote and vote, and leads.

        Against a stock voter, which waits exactly T: by that rule the follower that times out
        second wins (without pre-votes, Kafka 3.x, the first does). A window centred on T puts
        kwire second, or first, about half the time, the share a stock voter gets against
        another stock voter; a window ending at T (kwire's earlier rule) put it first nearly
        always, so it lost most elections against 4.x voters and won most against 3.x ones.
        The spread between two kwire deadlines is the same as before, so the protection
        against split votes is too; the price is that a follower may wait up to T + W for a
        dead leader (``tests/raft/sim_elections.py`` measures both races)."""
        timeout = self._config.fetch_timeout_ms
        half_window = timeout // (2 * FETCH_TIMEOUT_SPREAD)
        return now_ms + timeout - half_window + self._rng.randrange(2 * half_window + 1)

    def voter_election_deadline(self, now_ms: int) -> int | None:
        """An election deadline for a voter (now for the only voter); None for an observer."""
        if not self.is_voter:
            return None
        if self._control.voters.is_only_voter(self.local_key):
            return now_ms
        return self.election_deadline(now_ms)

    def election_backoff_ms(self, retries: int) -> int:
        """``KafkaRaftClient.binaryExponentialElectionBackoffMs``: 100 ms x rand[0, 2^retries),
        capped at ``election.backoff.max.ms``."""
        bound = 1 << min(max(retries, 1), 20)
        return min(self._config.election_backoff_max_ms, ELECTION_BACKOFF_BASE_MS * self._rng.randrange(bound))

    # ------------------------------------------------------------------ transitions

    def _initial_state(self, election: ElectionState, log_epoch: int, now_ms: int) -> EpochState:
        """``QuorumState.initialize``: an epoch below the log's -> Unattached at the log's epoch;
        this voter led -> Resigned; it voted for itself -> Candidate; a leader in the voter set
        -> Follower; else Unattached, keeping the vote."""
        voters = self._control.voters
        if election.epoch < log_epoch:
            return Unattached(log_epoch, self.voter_election_deadline(now_ms))
        if election.leader_id == self.identity.node_id and self.is_voter:
            return Resigned(
                election.epoch,
                self.local_key,
                set(voters.ids - {self.identity.node_id}),
                self.election_deadline(now_ms),
                [],
            )
        if election.voted_key is not None and election.voted_key.matches(self.local_key) and self.is_voter:
            return Candidate(election.epoch, self.local_key, voters, self.election_deadline(now_ms), retries=1)
        if election.leader_id is not None and voters.get(election.leader_id) is not None:
            return Follower(election.epoch, election.leader_id, self.fetch_deadline(now_ms), election.voted_key)
        return Unattached(election.epoch, self.voter_election_deadline(now_ms), election.voted_key)

    def transition(self, new: EpochState) -> None:
        """Change role, checking the transition table; the new election state, if it differs
        from the persisted one, is queued for this step's Outbox."""
        old = self.state
        if not transition_allowed(type(old), type(new), old.epoch, new.epoch):
            raise IllegalTransitionError(f"{old!r} -> {new!r} is not allowed")
        self._on_transition(old)
        self.state = new
        election = new.election()
        if election != self._persisted:
            self._unwritten = election
            self._persisted = election

    def transition_to_unattached(self, epoch: int, now_ms: int, voted_key: ReplicaKey | None = None) -> None:
        """Unattached in ``epoch``. Granting a vote restarts the election timer; otherwise an
        Unattached, Prospective or Candidate voter keeps the time it had left
        (``QuorumState.transitionToUnattached``), so that a lagging candidate bumping epochs
        cannot hold everyone else's timers back forever."""
        deadline = self.voter_election_deadline(now_ms)
        state = self.state
        if voted_key is None and deadline is not None:
            if isinstance(state, Unattached) and state.election_deadline_ms is not None:
                deadline = state.election_deadline_ms
            elif isinstance(state, (Prospective, Candidate)):
                deadline = state.election_deadline_ms
        if voted_key is None and epoch == state.epoch:
            voted_key = state.election().voted_key  # at most one vote per epoch, ever
        self.transition(Unattached(epoch, deadline, voted_key))

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Follow ``leader_id`` in ``epoch``, keeping this epoch's vote if it had one."""
        voted = self.state.election().voted_key if self.state.epoch == epoch else None
        self.transition(Follower(epoch, leader_id, self.fetch_deadline(now_ms), voted))

    def maybe_transition(self, leader_id: int | None, epoch: int, now_ms: int) -> bool:
        """React to a leader (or just an epoch) learned from any request or response
        (``KafkaRaftClient.maybeTransition``). Returns True if the role changed."""
        state = self.state
        if epoch < state.epoch:
            return False
        if leader_id is not None and leader_id < 0:
            leader_id = None
        if epoch > state.epoch:
            if leader_id is not None and leader_id != self.identity.node_id:
                self.transition_to_follower(epoch, leader_id, now_ms)
            else:
                self.transition_to_unattached(epoch, now_ms)
            return True
        if leader_id is None or leader_id == self.identity.node_id:
            return False
        if state.leader_id == leader_id and isinstance(state, (Follower, Prospective)):
            return False
        if isinstance(state, (Leader, Resigned, Follower)):
            raise RaftSafetyError(f"{state!r} told that {leader_id} leads epoch {epoch}")
        self.transition_to_follower(epoch, leader_id, now_ms)
        return True

    def start_election(self, now_ms: int) -> None:
        """Election timeout: a pre-vote (Prospective) first, unless disabled or alone."""
        if not self.is_voter:
            return
        voters = self._control.voters
        if self._config.pre_vote and not voters.is_only_voter(self.local_key):
            state = self.state
            previous_leader = state.leader_id if isinstance(state, (Follower, Prospective)) else None
            self.transition(
                Prospective(
                    state.epoch,
                    voters,
                    self.identity.node_id,
                    self.election_deadline(now_ms),
                    self.election_retries + 1,
                    state.election().voted_key,
                    previous_leader,
                )
            )
            self.election_retries += 1
            return
        self.become_candidate(now_ms)

    def restart_election(self, now_ms: int) -> None:
        """After a lost or timed-out election and its backoff: pre-vote again, or vote."""
        if self._config.pre_vote and not self._control.voters.is_only_voter(self.local_key):
            self.start_election(now_ms)
        else:
            self.become_candidate(now_ms)

    def become_candidate(self, now_ms: int) -> None:
        """Bump the epoch and vote for itself; a single voter wins at once (the caller sees
        a :class:`Candidate` whose votes are won and makes it leader)."""
        self.election_retries += 1
        self.transition(
            Candidate(
                self.state.epoch + 1,
                self.local_key,
                self._control.voters,
                self.election_deadline(now_ms),
                self.election_retries,
            )
        )

    def become_leader(
        self, now_ms: int, epoch_start_offset: int, append_linger_ms: int, max_batch_bytes: int = MAX_BATCH_SIZE_BYTES
    ) -> Leader:
        """``onBecomeLeader``: lead the epoch this Candidate won, from ``epoch_start_offset``
        (the log end offset). Raises :class:`NotInRoleError` unless a Candidate."""
        state = self.candidate()
        self.election_retries = 0
        leader = Leader(
            state.epoch,
            self.local_key,
            self._control.voters,
            epoch_start_offset,
            state.votes.granted,
            now_ms,
            int(self._config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR),
            append_linger_ms,
            max_batch_bytes,
        )
        self.transition(leader)
        return leader

    def resign(self, now_ms: int) -> None:
        """A leader gives up its epoch (graceful shutdown, check-quorum, or it removed itself):
        Resigned, telling the other voters, best successors first."""
        state = self.leader()
        self.transition(
            Resigned(
                state.epoch,
                self.local_key,
                set(state.voters.ids - {self.identity.node_id}),
                self.election_deadline(now_ms),
                state.preferred_successors(),
            )
        )


def voters_with_local_entry(identity: ReplicaIdentity, voters: VoterSet) -> VoterSet:
    """``voters`` with this replica's entry carrying its current endpoints and supported
    kraft.version range (unchanged when it is not a voter or has no endpoints)."""
    from server.raft.types import VoterNode

    node = voters.get(identity.node_id)
    if node is None or not identity.endpoints:
        return voters
    current = VoterNode(node.key, identity.endpoints, identity.supported_kraft_versions)
    if current == node:
        return voters
    return voters.update_voter(current) or voters
