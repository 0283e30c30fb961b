"""The checks of one topic-partition's replicas, read from brokers' log directories, against
each other and against the metadata log's history of the partition. Pure: the readers
(:mod:`tools.audit.broker_dirs`) give each copy's batches, :mod:`tools.audit.replica_scan` reads
the copies together in offset order into a :class:`PartitionScan` whose memory does not grow
with their size (scans of consecutive offset ranges combine, so a huge partition is read by many
tasks), the history (:mod:`tools.audit.history`) gives the metadata's view, and :func:`check_partition`
returns what they show.

Kafka's replication rules these checks rest on (``ReplicaManager``, ``Partition``,
``UnifiedLog``, ``LeaderEpochFileCache``):

* a follower appends the leader's batches as they are (``appendAsFollower``): below the point
  where two replicas' histories part, their batches are byte-identical, so base offset, last
  offset, partition leader epoch and CRC compare them without decompressing anything;
* a broker's high watermark (``replication-offset-checkpoint``) never exceeds what the leader
  had committed when the broker learned it: every offset below any replica's checkpointed high
  watermark was acknowledged to ``acks=all`` producers;
* a follower truncates to the leader's log on its next fetch (KIP-101/279 epoch validation),
  so a divergent tail above every high watermark is the normal state of a replica that was
  down during an election, not a fault;
* the batches of leader epoch ``e`` sit at offsets from the ``leader-epoch-checkpoint`` entry
  of ``e`` up to the next entry's; the partition leader epochs are the ones the controller
  gave out (``PartitionRegistration.merge``: every PartitionChangeRecord with a leader field
  other than -2 starts a new epoch).

Invariant names, as the report prints them (severity in brackets):

``corrupt_batch`` [violation] / ``torn_tail`` [warning]
    A batch whose CRC does not match, or bytes that cannot be framed as a batch; at the tail of
    the last segment recovery truncates them, so only a warning there.
``undecodable_records`` [violation]
    With a deep read (``kwire audit --deep``): a batch that passes its CRC but whose records do
    not decompress or decode -- the codec's payload (gzip, snappy, lz4, zstd), each record's
    framing, the record count, a control batch's ABORT/COMMIT marker.
``producer_snapshot`` [warning]
    A ``<offset>.snapshot`` producer-state file that cannot be read or lies beyond the log end:
    Kafka deletes it on recovery and rebuilds the state from the log.
``offsets_not_increasing`` / ``offset_gap`` [violation]
    A batch that does not start after the previous one ends; a hole between two batches where
    the cleaner has not compacted (below ``cleaner-offset-checkpoint`` a compacted partition has
    holes by design).
``log_below_high_watermark`` [violation]
    The replica's log ends below its own checkpointed high watermark: it lost records it knew
    to be committed (a wiped or truncated disk).
``leader_epoch_checkpoint`` [violation below the recovery point, warning above it]
    Checkpoint entries not ascending, or a batch whose epoch is not the one its offset's entry
    names. Above ``recovery-point-offset-checkpoint`` Kafka rebuilds the entries when it
    recovers the segment, so a mismatch there is a warning.
``epoch_not_in_metadata`` [violation]
    A leader epoch in the replica's batches or checkpoint that no PartitionRecord or
    PartitionChangeRecord gave out.
``lost_acknowledged_data`` [violation]
    Offsets below a replica's high watermark (acknowledged) that the reference replica (the
    leader the metadata names, else the replica of the newest epoch) does not hold, or holds
    other batches at: the signature of an unclean election or a lost disk. The replica need not
    hold them itself any more: a high watermark left in ``replication-offset-checkpoint`` by a
    copy whose directory is gone counts too. Named by offset range, the epochs of the lost
    batches where they are still on disk, and the metadata record that started the reference's
    epoch there.
``replica_divergence`` [violation] / ``divergent_uncommitted_tail`` [warning]
    A replica of the ISR whose copy parts from the reference's below the committed point, when
    it has no high watermark to say what it had acknowledged (the committed point is then the
    ISR's smallest log end); and a divergent tail above the replica's own high watermark (or of a
    replica out of the ISR), which it truncates when it fetches again: what a leader that
    crashed with unreplicated records leaves behind.
``topic_id_mismatch`` / ``stray_replica`` / ``missing_replica`` [violation]
    ``partition.metadata`` names another topic id than the metadata's; a replica on a broker the
    partition is not assigned to; a broker the partition is assigned to, whose log directory was
    given, without the partition's directory (or with only its checkpointed high watermark).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.audit.replica_scan import (
    BadBytes,
    BatchSummary,
    CopyScan,
    CopyStream,
    NoBatches,
    PartitionScan,
    ProducerSnapshotFile,
    ReplicaView,
    compared_pairs,
    scan_copies,
)

__all__ = [
    "RECOVERING", "VIOLATION", "WARNING", "BadBytes", "BatchSummary", "CopyScan", "CopyStream", "Finding",
    "NoBatches", "PartitionHistory", "PartitionReport", "PartitionScan", "PartitionState", "ProducerSnapshotFile",
    "ReplicaView", "check_partition", "compared_pairs", "planned_reference", "scan_copies",
]

VIOLATION = "violation"
WARNING = "warning"
RECOVERING = 1
"""PartitionRecord.LeaderRecoveryState after an unclean election (``LeaderRecoveryState``)."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The partition as one metadata record left it: ``record`` (PartitionRecord or
    PartitionChangeRecord) at ``metadata_offset`` (-1 for one read from a snapshot)."""

    metadata_offset: int
    record: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader_recovery_state: int


@dataclass
class PartitionHistory:
    """The metadata log's states of one partition, oldest first. ``complete``: the history
    starts at the PartitionRecord that created the partition (not at a snapshot of it)."""

    topic_id: str
    states: list[PartitionState]
    complete: bool

    def started_epoch(self, epoch: int) -> tuple[PartitionState, PartitionState | None] | None:
        """The state that started leader epoch ``epoch`` and the one before it, None when the
        history does not hold it."""
        for i, state in enumerate(self.states):
            if state.leader_epoch == epoch:
                return state, self.states[i - 1] if i else None
        return None


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation or warning of a partition, ``node`` its replica (None: the partition as a
    whole) and ``broker_id`` that replica's broker (``node.id`` of its log directory's
    ``meta.properties``; None when unknown), ``[offset, end_offset)`` the offsets it concerns
    where it concerns some (a corrupt batch's are its base and last offset + 1; bytes that frame
    no batch have the offset after the batch before them, or None, and no end)."""

    invariant: str
    severity: str
    topic: str
    partition: int
    node: str | None
    offset: int | None
    detail: str
    end_offset: int | None = None
    epochs: tuple[int, ...] = ()
    cause: str | None = None
    broker_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant, "severity": self.severity, "topic": self.topic,
            "partition": self.partition, "node": self.node, "broker_id": self.broker_id, "offset": self.offset,
            "end_offset": self.end_offset, "epochs": list(self.epochs), "cause": self.cause,
            "detail": self.detail,
        }


@dataclass
class PartitionReport:
    """What :func:`check_partition` found, and the facts it judged by: the reference replica,
    the committed point and its basis (``high-watermark``, ``isr-log-end`` or ``min-log-end``),
    each replica's log start, log end, high watermark and last epoch, and the lost ranges
    (``[start, end)``, merged over the replicas that held them)."""

    topic: str
    partition: int
    reference: str | None
    committed: int | None
    basis: str
    replicas: dict[str, dict[str, Any]]
    findings: list[Finding]
    lost: list[tuple[int, int]]
    topic_id: str | None = None
    """The metadata's topic id, else the one the copies' ``partition.metadata`` names (None)."""

    def summary(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "reference": self.reference,
            "topic_id": self.topic_id, "committed": self.committed, "basis": self.basis, "replicas": self.replicas,
            "lost": [list(r) for r in self.lost],
        }


class _Findings:
    def __init__(self, topic: str, partition: int, broker_ids: Mapping[str, int | None]) -> None:
        self.topic, self.partition, self.broker_ids = topic, partition, broker_ids
        self.items: list[Finding] = []

    def add(self, invariant: str, severity: str, node: str | None, offset: int | None, detail: str,
            **extra: Any) -> None:
        self.items.append(Finding(invariant, severity, self.topic, self.partition, node, offset, detail,
                                  broker_id=self.broker_ids.get(node) if node is not None else None, **extra))


def check_partition(
    topic: str,
    partition: int,
    replicas: Sequence[ReplicaView],
    scan: PartitionScan,
    history: PartitionHistory | None = None,
    brokers_present: Collection[int] | Mapping[int, str] = (),
) -> PartitionReport:
    """Every check of the module docstring for ``topic``-``partition``: ``replicas`` are the
    copies found (one per broker log directory holding it), ``scan`` what reading their batches
    left (:func:`scan_copies`; it must have compared the reference this picks with every other
    copy, :func:`compared_pairs`), ``history`` the metadata log's states of the partition (None:
    no metadata given, or the topic is not in it -- the checks against the metadata are
    skipped), ``brokers_present`` the broker ids whose log directories were given, or a map of
    them to their directories' names (for ``missing_replica``, named by the directory). Raises ValueError when ``scan`` lacks a comparison it needs."""
    names = dict(brokers_present) if isinstance(brokers_present, Mapping) else {}
    out = _Findings(topic, partition, {**{name: broker for broker, name in names.items()},
                                       **{r.node: r.broker_id for r in replicas}})
    copies = [_Copy(r, scan.copies[r.node]) for r in replicas]
    for copy in copies:
        _check_replica(copy, out)
    if history is not None:
        _check_against_metadata(copies, history, brokers_present, out)
    reference = _reference(copies, history)
    committed, basis = _committed_point(copies, history)
    lost: list[tuple[int, int]] = []
    if reference is not None:
        for copy in copies:
            if copy is not reference:
                lost += _compare(reference, copy, scan, committed, history, out)
    topic_id = history.topic_id if history is not None else next(
        (r.topic_id for r in replicas if r.topic_id is not None), None)
    return PartitionReport(
        topic, partition, None if reference is None else reference.node, committed, basis,
        {c.node: {"broker_id": c.view.broker_id, "log_start": c.log_start, "log_end": c.log_end,
                  "high_watermark": c.view.high_watermark, "on_disk": c.view.on_disk,
                  "last_epoch": c.scan.last_valid.epoch if c.scan.last_valid is not None else None}
         for c in copies},
        out.items, _merge(lost), topic_id,
    )


class _Copy:
    """A copy's facts and scan, with its log start and end worked out once."""

    __slots__ = ("log_end", "log_start", "node", "scan", "view")

    def __init__(self, view: ReplicaView, scan: CopyScan) -> None:
        self.view, self.scan, self.node = view, scan, view.node
        self.log_start = scan.log_start(view)
        self.log_end = scan.log_end(view)


# ------------------------------------------------------------------------------ one replica


def _check_replica(c: _Copy, out: _Findings) -> None:
    r, scan = c.view, c.scan
    if not r.on_disk:
        out.add("missing_replica", VIOLATION, r.node, None,
                f"no copy of the partition in the log directory, whose replication-offset-checkpoint still gives it "
                f"the high watermark {r.high_watermark}")
        return
    for bad, after in scan.bad:
        out.add("torn_tail" if bad.at_tail else "corrupt_batch", WARNING if bad.at_tail else VIOLATION, r.node,
                after, f"{bad.file} at byte {bad.position} ({bad.size} bytes): {bad.detail}")
    for b in scan.flagged:
        if not b.crc_valid:
            tail = b == scan.last and not scan.bad
            out.add("torn_tail" if tail else "corrupt_batch", WARNING if tail else VIOLATION, r.node, b.base_offset,
                    f"{b.file} at byte {b.position}: batch {b.base_offset}-{b.last_offset} fails its CRC",
                    end_offset=b.last_offset + 1)
        else:
            out.add("undecodable_records", VIOLATION, r.node, b.base_offset,
                    f"{b.file} at byte {b.position}: batch {b.base_offset}-{b.last_offset} passes its CRC but its "
                    f"records do not decode: {b.records_error}", end_offset=b.last_offset + 1)
    for prev, b in scan.disorder:  # a corrupt batch's header still frames it
        if b.base_offset <= prev.last_offset:
            out.add("offsets_not_increasing", VIOLATION, r.node, b.base_offset,
                    f"{b.file} at byte {b.position}: batch {b.base_offset}-{b.last_offset} after one ending at "
                    f"{prev.last_offset}")
        else:
            out.add("offset_gap", VIOLATION, r.node, prev.last_offset + 1,
                    f"no batch holds offsets {prev.last_offset + 1}-{b.base_offset - 1} (not compacted)",
                    end_offset=b.base_offset)
    for snapshot in r.producer_snapshots:
        if snapshot.error is not None or snapshot.offset > c.log_end:
            out.add("producer_snapshot", WARNING, r.node, snapshot.offset,
                    f"{snapshot.file}: {snapshot.error or f'beyond the log end {c.log_end}'} (recovery deletes it and "
                    f"rebuilds the producer state from the log)")
    if r.high_watermark is not None and r.high_watermark > c.log_end:
        out.add("log_below_high_watermark", VIOLATION, r.node, c.log_end,
                f"the log ends at {c.log_end}, below the replica's high watermark {r.high_watermark}",
                end_offset=r.high_watermark)
    _check_epochs(c, out)


def _check_epochs(c: _Copy, out: _Findings) -> None:
    r = c.view
    if r.epochs is None:
        if c.scan.last_valid is not None:
            out.add("leader_epoch_checkpoint", VIOLATION, r.node, None,
                    f"no readable leader-epoch-checkpoint: {r.epochs_error or 'missing'}")
        return
    entries = [e for e in r.epochs if e.start_offset < c.log_end]  # Kafka drops the rest on load
    for prev, e in zip(entries, entries[1:], strict=False):
        if e.epoch <= prev.epoch or e.start_offset < prev.start_offset:
            out.add("leader_epoch_checkpoint", VIOLATION, r.node, e.start_offset,
                    f"entry (epoch {e.epoch}, offset {e.start_offset}) after (epoch {prev.epoch}, offset "
                    f"{prev.start_offset}): entries must ascend")
            return
    starts = [e.start_offset for e in entries]
    for b in c.scan.misplaced.values():  # the first batch of each epoch the checkpoint does not name
        i = bisect_right(starts, b.base_offset) - 1
        named = entries[i].epoch if i >= 0 else None
        flushed = r.recovery_point is not None and b.last_offset < r.recovery_point
        out.add("leader_epoch_checkpoint", VIOLATION if flushed else WARNING, r.node, b.base_offset,
                f"batch {b.base_offset}-{b.last_offset} has epoch {b.epoch}; the checkpoint names "
                f"{'no epoch' if named is None else f'epoch {named}'} there"
                + ("" if flushed else " (above the recovery point: rebuilt on recovery)"),
                epochs=(b.epoch,))


# ------------------------------------------------------------------------------ metadata


def _check_against_metadata(copies: Sequence[_Copy], history: PartitionHistory,
                            brokers_present: Collection[int] | Mapping[int, str], out: _Findings) -> None:
    if not history.states:
        return
    last = history.states[-1]
    given = set(last.replicas) | set(last.adding_replicas)
    known = {s.leader_epoch for s in history.states}
    floor = -1 if history.complete else min(known)
    held = {c.view.broker_id for c in copies}  # a copy off disk is reported by _check_replica
    for c in copies:
        r = c.view
        if r.topic_id is not None and r.topic_id != history.topic_id:
            out.add("topic_id_mismatch", VIOLATION, r.node, None,
                    f"partition.metadata names topic id {r.topic_id}; the metadata's is {history.topic_id}")
        if r.broker_id is not None and r.broker_id not in given:
            out.add("stray_replica", VIOLATION, r.node, None,
                    f"broker {r.broker_id} holds the partition; the metadata assigns it to {list(last.replicas)}")
        epochs: dict[int, int] = {}
        for start, _end, epoch, _last, _acked in c.scan.runs:
            epochs.setdefault(epoch, start)
        for e in r.epochs or ():
            epochs.setdefault(e.epoch, e.start_offset)
        for epoch, offset in sorted(epochs.items()):
            if epoch > floor and epoch not in known:
                out.add("epoch_not_in_metadata", VIOLATION, r.node, offset,
                        f"leader epoch {epoch} (from offset {offset}) was never given out by the metadata log "
                        f"(its epochs: {sorted(known)})", epochs=(epoch,))
    names = brokers_present if isinstance(brokers_present, Mapping) else {}
    for broker in sorted(given & set(brokers_present) - held):
        out.add("missing_replica", VIOLATION, names.get(broker, str(broker)), None,
                f"broker {broker} is assigned the partition but its log directory has no copy of it")


# ------------------------------------------------------------------------------ replicas


def planned_reference(replicas: Sequence[ReplicaView], history: PartitionHistory | None) -> str | None:
    """The reference known before any batch is read: the leader the metadata names, when its
    copy is on disk (None: the scan must compare every pair)."""
    if history is not None and history.states:
        leader = history.states[-1].leader
        for r in replicas:
            if r.on_disk and r.broker_id == leader:
                return r.node
    return None


def _reference(copies: Sequence[_Copy], history: PartitionHistory | None) -> _Copy | None:
    """The leader the metadata names, when its copy is on disk; else the copy on disk whose
    last batch has the newest epoch (then the longest log)."""
    planned = planned_reference([c.view for c in copies], history)
    on_disk = [c for c in copies if c.view.on_disk]
    if planned is not None:
        return next(c for c in on_disk if c.node == planned)
    if not on_disk:
        return None
    return max(on_disk, key=lambda c: (c.scan.last_valid.epoch if c.scan.last_valid is not None else -1, c.log_end))


def _committed_point(copies: Sequence[_Copy], history: PartitionHistory | None) -> tuple[int | None, str]:
    marks = [c.view.high_watermark for c in copies if c.view.high_watermark is not None]
    if marks:
        return max(marks), "high-watermark"
    if history is not None and history.states:
        isr = set(history.states[-1].isr)
        ends = [c.log_end for c in copies if c.view.broker_id in isr]
        if ends:
            return min(ends), "isr-log-end"
    if copies:
        return min(c.log_end for c in copies), "min-log-end"
    return None, "none"


def _compare(ref: _Copy, r: _Copy, scan: PartitionScan, committed: int | None, history: PartitionHistory | None,
             out: _Findings) -> list[tuple[int, int]]:
    acked = r.view.high_watermark
    d: int | None = None
    if r.view.on_disk:
        pair = (ref.node, r.node)
        if pair not in scan.compared:
            raise ValueError(f"the scan did not compare {r.node} with the reference {ref.node}")
        d = scan.differences.get(pair)
    ref_end = ref.log_end
    if acked is not None and acked > ref_end:  # acknowledged past the reference's end, held or not
        d = ref_end if d is None else min(d, ref_end)
    if d is None:
        return []
    epochs = tuple(sorted({run[2] for run in r.scan.runs if run[3] >= d}))
    if acked is not None and acked > d:
        lost_epochs = tuple(sorted({run[2] for run in r.scan.runs if run[4] >= d}))
        held = "" if r.log_end >= acked else f" ({r.node} itself holds them only up to {r.log_end})"
        in_epochs = f" (epochs {list(lost_epochs)})" if lost_epochs else ""
        out.add("lost_acknowledged_data", VIOLATION, r.node, d,
                f"offsets {d}-{acked - 1}{in_epochs} were below the high watermark {acked} of {r.node} and "
                f"{ref.node}, the reference, does not hold them{held}",
                end_offset=acked, epochs=lost_epochs, cause=_cause(ref, d, history))
        return [(d, acked)]
    in_isr = history is None or not history.states or r.view.broker_id in history.states[-1].isr
    if acked is None and in_isr and committed is not None and committed > d:
        end = min(committed, r.log_end)
        out.add("replica_divergence", VIOLATION, r.node, d,
                f"{r.node} and {ref.node} part at offset {d}, below the committed point {committed}",
                end_offset=end, epochs=epochs, cause=_cause(ref, d, history))
        return []
    out.add("divergent_uncommitted_tail", WARNING, r.node, d,
            f"{r.node} holds offsets {d}-{r.log_end - 1} that {ref.node} does not, above its own high watermark "
            f"{acked}: truncated when it fetches again", end_offset=r.log_end, epochs=epochs)
    return []


def _cause(ref: _Copy, offset: int, history: PartitionHistory | None) -> str:
    """The metadata record that started the reference's epoch at ``offset`` (the epoch of its
    batch there, or its newest epoch when its log ends before ``offset``)."""
    runs = ref.scan.runs
    at = next((run for run in runs if run[1] > offset), None)
    if at is not None:
        epoch = at[2]
    elif history is not None and history.states:
        epoch = history.states[-1].leader_epoch
    elif runs:
        epoch = runs[-1][2]
    else:
        return f"{ref.node} holds nothing from offset {offset}"
    found = None if history is None else history.started_epoch(epoch)
    if found is None:
        return f"{ref.node} continues from offset {offset} in leader epoch {epoch} (no metadata record for it)"
    state, before = found
    where = "a snapshot" if state.metadata_offset < 0 else f"metadata offset {state.metadata_offset}"
    if state.leader < 0:
        return (f"{state.record} at {where} left the partition without a leader in epoch {epoch} (ISR "
                f"{list(state.isr)}): no copy given holds these offsets")
    text = f"{state.record} at {where} made broker {state.leader} leader in epoch {epoch}"
    if before is not None and state.leader not in before.isr:
        text += f", outside the ISR {list(before.isr)}: an unclean election"
    if state.leader_recovery_state == RECOVERING:
        text += " (leader recovery state RECOVERING)"
    return text


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
