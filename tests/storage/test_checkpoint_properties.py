"""Property tests of the leader-epoch cache and checkpoint, checkpoint files and quorum-state.

* ``LeaderEpochFileCache``: driven by assign / truncate-from-end / truncate-from-start and
  checked after every step against a plain list and brute-force answers for ``epochForOffset``
  and ``endOffsetFor``; the ``leader-epoch-checkpoint`` file always holds exactly the entries.
* ``CheckpointFile``: any entries round-trip; a count that does not match is refused.
* ``quorum-state`` (``FileQuorumStateStore``): any election state round-trips through the file
  at data_version 0 and 1, keeping what that version holds.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import storage.fileio
from kwire.uuid import ZERO_UUID, Uuid
from storage.checkpoint import decode_checkpoint_lines, encode_checkpoint_lines
from storage.errors import InconsistentStateError
from storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    decode_checkpoint,
    encode_checkpoint,
)
from storage.quorum_state import (
    FileQuorumStateStore,
    StoredElectionState,
    decode_quorum_state,
    encode_quorum_state,
)
from tests.properties import examples

# ---------------------------------------------------------------------------------------------
# leader epoch cache against a model


def brute_epoch_for_offset(entries: list[tuple[int, int]], offset: int) -> int | None:
    at_or_before = [epoch for epoch, start in entries if start <= offset]
    return at_or_before[-1] if at_or_before else None


def brute_end_offset_for(entries: list[tuple[int, int]], requested: int, leo: int) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor`` from its definition: the largest epoch <= the
    requested one, and where the next higher epoch starts (the log end for the latest)."""
    if requested == -1 or not entries:
        return -1, -1
    if entries[-1][0] == requested:
        return requested, leo
    higher = [(e, s) for e, s in entries if e > requested]
    if not higher:
        return -1, -1
    lower = [e for e, _ in entries if e <= requested]
    return (lower[-1] if lower else requested), higher[0][1]


class EpochCacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._saved_fsync = storage.fileio._fsync
        storage.fileio._fsync = lambda fd: None  # the file's content, not its durability, is tested
        self.root = Path(tempfile.mkdtemp(prefix="kwire-epoch-model-"))
        self.cache = LeaderEpochCache.load(self.root)
        self.model: list[tuple[int, int]] = []  # (epoch, start offset), ascending in both

    def teardown(self) -> None:
        storage.fileio._fsync = self._saved_fsync
        shutil.rmtree(self.root, ignore_errors=True)

    def _near(self, data: st.DataObject, index: int, spread: int) -> int:
        """A value at, around or away from the entries' epochs (index 0) or starts (index 1)."""
        known = [entry[index] for entry in self.model]
        around = st.sampled_from(known).flatmap(lambda v: st.integers(max(0, v - 2), v + spread)) if known else st.nothing()
        return data.draw(st.integers(0, 300) | around)

    @rule(data=st.data())
    def assign(self, data: st.DataObject) -> None:
        epoch, start = self._near(data, 0, 3), self._near(data, 1, 40)
        latest = self.model[-1] if self.model else None
        changed = self.cache.assign(epoch, start)
        if latest is not None and latest[0] == epoch and start >= latest[1]:
            assert not changed
            return
        assert changed
        # entries that would no longer be monotonic with the new one go
        self.model = [(e, s) for e, s in self.model if e < epoch and s < start] + [(epoch, start)]

    @precondition(lambda self: bool(self.model))
    @rule(later=st.sampled_from([0, 0, 1, 5]))
    def assign_the_latest_epoch_again(self, later: int) -> None:
        # a leader appending more batches in its epoch: never a change
        epoch, start = self.model[-1]
        assert not self.cache.assign(epoch, start + later)

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data())
    def assign_an_earlier_epoch_again(self, data: st.DataObject) -> None:
        # a diverged follower learning an older epoch's end: every entry from that epoch on goes
        slot = data.draw(st.integers(0, len(self.model) - 2))
        epoch, start = self.model[slot]
        new_start = start + data.draw(st.integers(1, 5))
        assert self.cache.assign(epoch, new_start)
        self.model = [(e, s) for e, s in self.model if e < epoch and s < new_start] + [(epoch, new_start)]

    @rule(epoch=st.integers(-5, -1), start=st.integers(-5, 300))
    def negative_assign_is_refused(self, epoch: int, start: int) -> None:
        with pytest.raises(ValueError):
            self.cache.assign(epoch, start)
        with pytest.raises(ValueError):
            self.cache.assign(abs(epoch), -abs(start) - 1)

    @rule(data=st.data())
    def truncate_from_end(self, data: st.DataObject) -> None:
        end = data.draw(st.integers(-2, -1)) if data.draw(st.integers(0, 9)) == 0 else self._near(data, 1, 2)
        kept = self.model if end < 0 else [(e, s) for e, s in self.model if s < end]
        assert self.cache.truncate_from_end(end) == (kept != self.model)
        self.model = kept

    @rule(data=st.data())
    def truncate_from_start(self, data: st.DataObject) -> None:
        start = self._near(data, 1, 2)
        before = [(e, s) for e, s in self.model if s <= start]
        after = [(e, s) for e, s in self.model if s > start]
        changed = self.cache.truncate_from_start(start)
        assert changed == bool(before)
        if before:
            self.model = [(before[-1][0], start), *after]

    @rule()
    def reload(self) -> None:
        self.cache = LeaderEpochCache.load(self.root)

    @invariant()
    def matches_model(self) -> None:
        entries = [(e.epoch, e.start_offset) for e in self.cache.entries]
        assert entries == self.model
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
        assert self.cache.latest_epoch == (self.model[-1][0] if self.model else None)
        assert self.cache.earliest_entry == (EpochEntry(*self.model[0]) if self.model else None)
        raw = (self.root / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes()
        assert [(e.epoch, e.start_offset) for e in decode_checkpoint(raw)] == self.model or (
            raw == b"" and not self.model)

    @invariant()
    def lookups_match_brute_force(self) -> None:
        leo = (self.model[-1][1] + 7) if self.model else 0
        probes = {-1, 0, 400}
        for epoch, start in self.model:
            probes |= {epoch - 1, epoch, epoch + 1, start - 1, start, start + 1}
        for p in probes:
            assert self.cache.epoch_for_offset(p) == brute_epoch_for_offset(self.model, p)
            assert self.cache.end_offset_for(p, leo) == brute_end_offset_for(self.model, p, leo)


TestEpochCacheModel = EpochCacheMachine.TestCase
TestEpochCacheModel.settings = settings(
    max_examples=examples(60), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# ---------------------------------------------------------------------------------------------
# checkpoint files

epoch_entries = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=10
).map(lambda pairs: [EpochEntry(e, o) for e, o in pairs])


@settings(deadline=None)
@given(entries=epoch_entries)
def test_leader_epoch_checkpoint_round_trip(entries: list[EpochEntry]) -> None:
    raw = encode_checkpoint(entries)
    lines = raw.decode().split("\n")
    assert lines[:2] == ["0", str(len(entries))] and lines[-1] == ""
    assert lines[2:-1] == [f"{e.epoch} {e.start_offset}" for e in entries]
    assert decode_checkpoint(raw) == entries


@settings(deadline=None)
@given(
    rows=st.lists(st.lists(st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True), min_size=3, max_size=3),
                  max_size=8),
    skew=st.integers(-3, 3).filter(lambda n: n != 0),
)
def test_checkpoint_lines_round_trip_and_count_is_checked(rows: list[list[str]], skew: int) -> None:
    raw = encode_checkpoint_lines(rows)
    assert decode_checkpoint_lines(raw, "x", 3) == rows
    header, _, body = raw.partition(b"\n")[0], None, raw.split(b"\n", 2)[2]
    wrong = header + b"\n" + str(len(rows) + skew).encode() + b"\n" + body
    with pytest.raises(InconsistentStateError):
        decode_checkpoint_lines(wrong, "x", 3)


# ---------------------------------------------------------------------------------------------
# quorum-state

node_ids = st.none() | st.integers(0, 2**31 - 1)
states = st.builds(
    StoredElectionState,
    epoch=st.integers(0, 2**31 - 1),
    leader_id=node_ids,
    voted_id=node_ids,
    voted_directory_id=st.none() | st.just(ZERO_UUID) | st.binary(min_size=16, max_size=16).map(Uuid),
    voters=st.frozensets(st.integers(0, 2**31 - 1), max_size=5),
)


def kept_at(state: StoredElectionState, version: int) -> StoredElectionState:
    """What the file holds of ``state`` at ``version``: v0 the voters and no directory id, v1 the
    voted directory id (only with a vote, zero meaning none) and no voters."""
    directory = state.voted_directory_id
    keep_directory = version == 1 and state.voted_id is not None and directory not in (None, ZERO_UUID)
    return StoredElectionState(
        epoch=state.epoch,
        leader_id=state.leader_id,
        voted_id=state.voted_id,
        voted_directory_id=directory if keep_directory else None,
        voters=state.voters if version == 0 else frozenset(),
    )


@settings(deadline=None, max_examples=examples(80))
@given(state=states, version=st.sampled_from([0, 1]))
def test_quorum_state_round_trip(state: StoredElectionState, version: int) -> None:
    raw = encode_quorum_state(state, version)
    assert b" " not in raw and b"\n" not in raw  # one compact JSON line, as Jackson writes it
    assert decode_quorum_state(raw) == (kept_at(state, version), version)
    if state.voted_id is not None or state.voted_directory_id is None:
        # a state Kafka can hold (its directory id is part of the voted replica key): re-encoding
        # what was read gives the same bytes
        assert encode_quorum_state(decode_quorum_state(raw)[0], version) == raw


@settings(max_examples=examples(20), deadline=None)
@given(first=states, second=states, version=st.sampled_from([0, 1]))
def test_quorum_state_store_keeps_the_last_write(
    first: StoredElectionState, second: StoredElectionState, version: int
) -> None:
    saved = storage.fileio._fsync
    storage.fileio._fsync = lambda fd: None
    root = Path(tempfile.mkdtemp(prefix="kwire-quorum-state-"))
    try:
        store = FileQuorumStateStore(root / "quorum-state")
        assert store.read_election_state() is None
        store.write_election_state(first, version)
        store.write_election_state(second, version)
        assert store.read_election_state() == kept_at(second, version)
        assert store.read_data_version() == version
        assert [p.name for p in root.iterdir()] == ["quorum-state"]  # no temporary file left
    finally:
        storage.fileio._fsync = saved
        shutil.rmtree(root, ignore_errors=True)


@settings(deadline=None)
@given(state=states, version=st.integers(2, 10) | st.integers(-5, -1))
def test_quorum_state_of_an_unknown_version_is_refused(state: StoredElectionState, version: int) -> None:
    with pytest.raises(ValueError):
        encode_quorum_state(state, version)
    raw = encode_quorum_state(state, 1).replace(b'"data_version":1', b'"data_version":%d' % version)
    with pytest.raises(InconsistentStateError):
        decode_quorum_state(raw)
