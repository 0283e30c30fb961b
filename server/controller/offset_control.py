"""Where the active controller's writes go and what its image holds ahead of the commit:
Kafka's ``OffsetControlManager`` (``nextWriteOffset``, the offsets of the uncommitted writes)
with the ledger of records applied ahead.

The active controller applies a write's records to its image when it appends them, at the
offsets they will have: the log end offset the core reports plus the records handed to the
driver but not yet appended (:meth:`OffsetControl.next_write_offset`). Each append applied so
is a ledger entry (:class:`AppliedAhead`: its token, offsets and the leader epoch). When a
batch commits the entries it reaches are retired and only the records not applied ahead are
replayed (:meth:`OffsetControl.replay_committed`). The image must go back to the committed one
(Kafka reverts its timeline data structures to the last committed offset) when an applied
append will not commit as it was applied:

* the node no longer leads the epoch the first entry was appended in
  (:meth:`OffsetControl.outlived`), or a committed batch reaching the entries is of another
  epoch (:meth:`OffsetControl.still_ours` is False);
* one of the host's appends came back refused, or landed at another offset than the one its
  records were applied at (:meth:`OffsetControl.misplaced`).

Sans-IO: the caller replays, reverts and logs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kwire.errors import Errors
from server.controller.controller import REPLAYED_KEY_BYTES
from server.raft.events import AppendResult, CommittedBatch
from storage.records import RecordBatch

__all__ = ["AppliedAhead", "OffsetControl"]

_REPLAYED_TYPE_BYTES = bytes(int(b in REPLAYED_KEY_BYTES) for b in range(256))
"""REPLAYED_KEY_BYTES as the 256 flags ``RecordBatch.iter_selected_values`` takes."""


@dataclass(frozen=True, slots=True)
class AppliedAhead:
    """One of the host's appends whose records the image holds ahead of their commit: the
    append's ``token``, its records' offsets ``first`` to ``last``, and the leader ``epoch`` it
    was made in."""

    token: int
    first: int
    last: int
    epoch: int


class OffsetControl:
    """The write offsets and the applied-ahead ledger of one controller (module docstring)."""

    def __init__(self) -> None:
        self.applied: deque[AppliedAhead] = deque()
        """The appends the image holds ahead of their commit, in offset order."""
        self._by_token: dict[int, AppliedAhead] = {}
        self.write_end = 0
        """The offset after the host's latest append on the active controller (0: none since
        the writes last failed)."""
        self.pending_records = 0
        """Records appended since the driver last took the host's appends (they are not in the
        core's log end offset yet)."""

    @property
    def speculating(self) -> bool:
        """The image holds records that have not committed yet."""
        return bool(self.applied)

    def next_write_offset(self, log_end_offset: int) -> int:
        """The offset the next append's first record will have, given the core's log end offset
        (``OffsetControlManager.nextWriteOffset``)."""
        return log_end_offset + self.pending_records

    def appended(self, token: int, first: int, count: int, epoch: int, *, ahead: bool) -> None:
        """Append ``token`` of ``count`` records starting at ``first`` in leader ``epoch`` was
        handed to the driver; ``ahead``: its records were applied to the image already."""
        if ahead:
            applied = AppliedAhead(token, first, first + count - 1, epoch)
            self.applied.append(applied)
            self._by_token[token] = applied
        self.write_end = first + count
        self.pending_records += count

    def handed_over(self) -> None:
        """The driver took the appends: the core's log end offset will count them."""
        self.pending_records = 0

    def uncommitted(self, replayed_offset: int) -> int:
        """Records the host appended beyond ``replayed_offset`` (0 or less: none)."""
        return self.write_end - replayed_offset

    def writes_failed(self) -> None:
        """The uncommitted writes failed (leadership lost): no write offset is pending."""
        self.write_end = 0

    def clear(self) -> None:
        """The image went back to (or was replaced by) a committed one: nothing is ahead."""
        self.applied.clear()
        self._by_token.clear()

    def outlived(self, leader_epoch: int | None) -> bool:
        """Records are applied ahead, but this node no longer leads the epoch they were
        appended in (``leader_epoch``: the epoch it leads, None off the leader): they may never
        commit."""
        return bool(self.applied) and not (leader_epoch is not None and leader_epoch == self.applied[0].epoch)

    def still_ours(self, leader_epoch: int | None, batch: CommittedBatch) -> bool:
        """The records applied ahead will commit as they were applied: this node still leads
        (``leader_epoch``, None off the leader) the epoch they were appended in, and ``batch``
        is of that epoch where it reaches them. Call with records applied ahead."""
        first = self.applied[0]
        return (
            leader_epoch is not None
            and leader_epoch == first.epoch
            and (batch.last_offset < first.first or batch.epoch == first.epoch)
        )

    def misplaced(self, result: AppendResult) -> AppliedAhead | None:
        """The ledger entry of the append ``result`` is for, when its records did not land
        where they were applied (refused, or another base offset); else None."""
        applied = self._by_token.get(result.token)
        if applied is not None and (result.error_code != Errors.NONE or result.base_offset != applied.first):
            return applied
        return None

    def replay_committed(self, batch: CommittedBatch, replay: Callable[[bytes | None, int], None]) -> None:
        """Replay the records of the committed data ``batch`` that were not applied ahead, in
        offset order (``replay(value, offset)``), retiring the ledger entries it completes.
        Records ``ControlManagers.replay`` would pass over (NoOps) are not handed to it."""
        if not self.applied:  # nothing applied ahead: only the replayed records are read out
            base = batch.base_offset
            for index, selected in RecordBatch(batch.data).iter_selected_values(_REPLAYED_TYPE_BYTES):
                replay(selected, base + index)
            return
        applied, replayed = self.applied, REPLAYED_KEY_BYTES
        for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
            if applied and applied[0].first <= offset:  # applied when it was appended
                if offset >= applied[0].last:
                    del self._by_token[applied.popleft().token]
                continue
            if value is not None and len(value) >= 2 and value[1] in replayed:  # else not replayed
                replay(value, offset)
