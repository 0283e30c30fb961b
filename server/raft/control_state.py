"""The voter set and kraft.version as the log says them (Kafka's
``KRaftControlRecordStateMachine``).

The bootstrap values (static ``controller.quorum.voters`` at kraft.version 0, or the bootstrap
checkpoint's VotersRecord) hold until a VotersRecord or KRaftVersionRecord appears in the log or
in a snapshot. Each change is kept with the offset it was written at, so that a truncation
(a follower's log diverged) forgets exactly the changes above the cut, and the leader can tell
whether the latest voter change is committed yet (KIP-853: one uncommitted change at a time).
A snapshot's control records count as written at its last offset (``snapshot.offset - 1``).
"""

from __future__ import annotations

from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.voters_record import VotersRecord
from server.raft.control import control_records_of, voter_set_from_record
from server.raft.log import RaftLog
from server.raft.types import (
    BOOTSTRAP_SNAPSHOT_ID,
    MAX_FETCH_SIZE_BYTES,
    OffsetAndEpoch,
    VoterSet,
)
from storage.batch_scan import iter_batches
from storage.records import RecordBatch
from storage.snapshot_format import read_snapshot_batches


class ControlRecordStateMachine:
    """Voter-set and kraft.version history of one replica's log.

    ``voters`` / ``kraft_version`` are the bootstrap values, used while the log holds none.
    Offsets are log offsets; history entries stay sorted by offset.
    """

    def __init__(self, voters: VoterSet, kraft_version: int) -> None:
        self._bootstrap_voters = voters
        self._bootstrap_kraft_version = kraft_version
        self._voter_history: list[tuple[int, VoterSet]] = []
        self._kraft_history: list[tuple[int, int]] = []

    @property
    def voters(self) -> VoterSet:
        """The newest voter set: from the log (committed or not), else the bootstrap one."""
        return self._voter_history[-1][1] if self._voter_history else self._bootstrap_voters

    @property
    def kraft_version(self) -> int:
        """The newest finalized kraft.version level: from the log, else the bootstrap one."""
        return self._kraft_history[-1][1] if self._kraft_history else self._bootstrap_kraft_version

    @property
    def voters_in_log(self) -> bool:
        """True once a VotersRecord was read from the log or a snapshot."""
        return bool(self._voter_history)

    def latest_voters_offset(self) -> int | None:
        """Offset of the newest VotersRecord in the log, or None when there is none."""
        return self._voter_history[-1][0] if self._voter_history else None

    def at_offset(self, offset: int) -> tuple[int, VoterSet]:
        """The kraft.version and voter set as of ``offset`` (inclusive): what a snapshot ending
        after it writes (``KafkaRaftClient.createSnapshot`` asks for the values at the last
        contained offset)."""
        kraft_version = self._bootstrap_kraft_version
        for at, level in self._kraft_history:
            if at <= offset:
                kraft_version = level
        voters = self._bootstrap_voters
        for at, voter_set in self._voter_history:
            if at <= offset:
                voters = voter_set
        return kraft_version, voters

    def load(self, log: RaftLog) -> OffsetAndEpoch | None:
        """Read the newest snapshot's control records (unless it is the bootstrap checkpoint)
        and then every control batch of the log after it (the whole log without one), a chunk
        of ``MAX_FETCH_SIZE_BYTES`` at a time. Returns the snapshot id read, which the state
        machine must load first, or None."""
        latest = log.latest_snapshot_id()
        loaded = None
        if latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
            size = log.snapshot_size(latest) or 0
            self.read_snapshot(latest, log.read_snapshot(latest, 0, size))
            loaded = latest
        # the log below a snapshot may still be there: its changes are older than the snapshot's
        offset = log.log_start_offset if loaded is None else max(log.log_start_offset, loaded.offset)
        while offset < log.log_end_offset:
            progressed = False
            for batch in iter_batches(log.read(offset, MAX_FETCH_SIZE_BYTES)):
                if batch.last_offset < offset:
                    continue
                self.add_batch(batch)
                offset = batch.last_offset + 1
                progressed = True
            if not progressed:
                break
        return loaded

    def add_batch(self, batch: RecordBatch) -> None:
        """Record the VotersRecord and KRaftVersionRecord of a control batch (any other batch
        is ignored)."""
        if not batch.is_control:
            return
        for record in control_records_of(batch):
            if isinstance(record.message, VotersRecord):
                self._voter_history.append((record.offset, voter_set_from_record(record.message)))
            elif isinstance(record.message, KRaftVersionRecord):
                self._kraft_history.append((record.offset, record.message.kraft_version))

    def truncate(self, offset: int) -> None:
        """Forget every change written at or after ``offset`` (the log was truncated there)."""
        self._voter_history = [(o, v) for o, v in self._voter_history if o < offset]
        self._kraft_history = [(o, v) for o, v in self._kraft_history if o < offset]

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Take the voters and kraft.version a snapshot holds, as written at its last offset
        (changes at or above it are dropped). ``data`` is the whole snapshot file."""
        content = read_snapshot_batches(data)  # its control batches: the data is not needed
        at = snapshot_id.offset - 1
        self.truncate(at)
        if content.voters is not None:
            self._voter_history.append((at, voter_set_from_record(content.voters)))
        if any(r.message.__class__ is KRaftVersionRecord for r in content.control):
            self._kraft_history.append((at, content.kraft_version))

    def replace_with_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A downloaded snapshot replaced the whole log: the history is the snapshot's alone."""
        self._voter_history = []
        self._kraft_history = []
        self.read_snapshot(snapshot_id, data)
