"""Seeded whole-quorum simulations (``tools.simulate``) with invariants after every event.

``KWIRE_SIM_SEEDS`` (default 500) sets how many seeds the normal run covers, ``KWIRE_SIM_FIRST``
the first one (default 0), ``KWIRE_SIM_WORKERS`` the processes each test item uses (default 2,
1 under pytest-xdist); seeds run in items of ``CHUNK``;
``KWIRE_SIM_WIRE=1`` makes the router encode and decode every message at its API version.
``test_stray_request_seeds`` runs the "stray" scenario (the differential probe's request shapes
from outside the quorum) on a fifth as many seeds, ``test_broker_seeds`` the "brokers" scenario
(``tools.simulate.brokers``: simulated brokers and an admin against the node's own controller host,
``server.controller.host``) on as many. A
nightly run: ``KWIRE_SIM_FIRST=10000 KWIRE_SIM_SEEDS=10000 pytest tests/raft/test_simulation.py
-k seeds``. A failure prints the command that replays its seed alone::

    KWIRE_SIM_SEED=1234 pytest tests/raft/test_simulation.py -k replay

Every seed's run also yields a digest of each step's event, Outbox and resulting role
(``sim.trace_line``). ``sim_traces.txt`` holds the digests of seeds 0-499 as the core behaves
today, ``sim_broker_traces.txt`` those of the "brokers" scenario (the controller host's
decisions reach the trace as the records it appends): a change meant to keep behaviour (a
refactoring) must keep them all. A change meant to
alter behaviour re-records them, and says so in its commit::

    KWIRE_SIM_RECORD=1 pytest tests/raft/test_simulation.py -k seeds
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from server.raft.log import MemoryRaftLog
from tools.simulate.cluster import Cluster
from tools.simulate.invariants import InvariantViolation
from tools.simulate.scenarios import SCENARIOS, run_scenario

SEEDS = int(os.environ.get("KWIRE_SIM_SEEDS", "500"))
FIRST = int(os.environ.get("KWIRE_SIM_FIRST", "0"))
WORKERS = int(os.environ.get("KWIRE_SIM_WORKERS", "1" if os.environ.get("PYTEST_XDIST_WORKER") else "2"))
CHUNK = 50
"""Seeds per test item: the items of a run are spread over pytest-xdist's workers, each
running its seeds in its own process (``WORKERS`` 1 under xdist): more processes than cores
made each seed cost a fifth more CPU time."""
pytestmark = pytest.mark.simulation
"""``make test`` runs this module beside the other tests, at idle CPU priority (Makefile)."""
TRACES = Path(__file__).with_name("sim_traces.txt")
BROKER_TRACES = Path(__file__).with_name("sim_broker_traces.txt")


def _recorded_traces(path: Path = TRACES) -> dict[int, str]:
    rows = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {int(seed): digest for seed, digest in rows}


def _chunks(first: int, count: int) -> list[range]:
    return [range(start, min(start + CHUNK, first + count)) for start in range(first, first + count, CHUNK)]


def _chunk_id(seeds: range) -> str:
    return f"{seeds.start}-{seeds.stop - 1}"


def _replay_command(seed: int) -> str:
    return f"KWIRE_SIM_SEED={seed} pytest tests/raft/test_simulation.py -k replay"


def _run_named(scenario: str | None, seed: int) -> tuple[int, str | None, int, str]:
    try:
        stats = run_scenario(seed, scenario)
    except Exception:  # report every failure with its seed, not only invariant violations
        return (seed, traceback.format_exc(), 0, "")
    return (seed, None, stats.events, stats.trace_digest)


def _record(traces: Path, digests: dict[int, str]) -> None:
    """Merge ``digests`` into ``traces`` under a lock (items of one run record side by side)."""
    with open(traces.with_name(traces.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = _recorded_traces(traces) | digests
        traces.write_text("".join(f"{seed} {recorded[seed]}\n" for seed in sorted(recorded)))


def _check_scenario_seeds(scenario: str | None, seeds: range, traces: Path | None = None) -> None:
    """Run ``scenario`` (``None``: the default mix, ``SCENARIOS``) on ``seeds`` (``WORKERS``
    processes); fail with the first failure and the command that replays it. With ``traces``,
    each seed's trace digest must equal the one recorded there (``KWIRE_SIM_RECORD=1`` records
    them)."""
    started = time.monotonic()
    run = functools.partial(_run_named, scenario)
    if WORKERS > 1:
        with ProcessPoolExecutor(max_workers=WORKERS) as pool:
            results = list(pool.map(run, seeds, chunksize=max(1, len(seeds) // (4 * WORKERS))))
    else:
        results = [run(seed) for seed in seeds]
    name = scenario or ", ".join(SCENARIOS)
    events = sum(count for _, _, count, _ in results)
    print(f"{len(results)} seeds ({name}), {events} events, {time.monotonic() - started:.1f} s")
    failures = [(seed, error) for seed, error, _, _ in results if error is not None]
    if failures:
        seed, error = failures[0]
        env = f"KWIRE_SIM_SCENARIO={scenario} " if scenario else ""
        pytest.fail(
            f"{len(failures)} of {len(results)} {name} seeds failed: {[s for s, _ in failures][:20]}\n"
            f"first failure, replay with: {env}{_replay_command(seed)}\n{error}"
        )
    if traces is None or os.environ.get("KWIRE_SIM_WIRE") == "1":
        return  # messages re-decoded from bytes hold views of buffers: their reprs differ
    digests = {seed: digest for seed, _, _, digest in results}
    if os.environ.get("KWIRE_SIM_RECORD") == "1":
        _record(traces, digests)
        return
    recorded = _recorded_traces(traces)
    changed = sorted(seed for seed, digest in digests.items() if recorded.get(seed, digest) != digest)
    assert not changed, (
        f"{len(changed)} {name} seeds behave differently from {traces.name}: {changed[:20]} "
        "(re-record with KWIRE_SIM_RECORD=1 only if the change is meant to alter behaviour)"
    )


@pytest.mark.parametrize("seeds", _chunks(FIRST, SEEDS), ids=_chunk_id)
def test_simulation_seeds(seeds: range) -> None:
    """The default scenarios (``SCENARIOS``) on ``KWIRE_SIM_SEEDS`` seeds from
    ``KWIRE_SIM_FIRST``, ``CHUNK`` per item: every invariant holds after every event, and each
    seed's trace digest is the one in ``sim_traces.txt``."""
    _check_scenario_seeds(None, seeds, TRACES)


@pytest.mark.parametrize("seeds", _chunks(FIRST, max(1, SEEDS // 5)), ids=_chunk_id)
def test_stray_request_seeds(seeds: range) -> None:
    """The differential probe's requests (``tools.simulate.stray.stray_request``) from a replica outside the
    quorum, delivered to random nodes of a loaded quorum: every invariant holds after every
    event and the quorum commits afterwards. ``KWIRE_SIM_SEEDS / 5`` seeds from
    ``KWIRE_SIM_FIRST`` (100 by default); replay one with ``KWIRE_SIM_SEED=N
    KWIRE_SIM_SCENARIO=stray``."""
    _check_scenario_seeds("stray", seeds)


@pytest.mark.parametrize("seeds", _chunks(FIRST, SEEDS), ids=_chunk_id)
def test_broker_seeds(seeds: range) -> None:
    """Simulated brokers register and heartbeat with the active controller through leader
    crashes, isolation and broker deaths (``tools.simulate.brokers``): broker epochs are the
    offsets of their registrations, every node holds the same image at the same offset, and
    every broker runs again once the faults end. ``KWIRE_SIM_SEEDS`` seeds from
    ``KWIRE_SIM_FIRST``; replay one with ``KWIRE_SIM_SEED=N KWIRE_SIM_SCENARIO=brokers``."""
    _check_scenario_seeds("brokers", seeds, BROKER_TRACES)


def test_the_broker_scenario_reaches_topics_and_isr_changes() -> None:
    """The "brokers" scenario is not idle: over a few seeds topics are committed, partition
    leaders change ISRs through AlterPartition, reassignments start and complete through it,
    brokers finish controlled shutdowns,
    fencing, unfencing and shutdowns move partition leadership, and nodes load controller
    images from snapshots, and active controllers apply writes ahead of their commit and go
    back to the committed image when they lose leadership."""
    from tools.simulate.scenarios import run_scenario

    stats = [run_scenario(seed, "brokers") for seed in range(8)]
    assert sum(s.topics_created for s in stats) >= 8, stats
    assert sum(s.isr_changes for s in stats) >= 8, stats
    assert sum(s.reassignments for s in stats) >= 8, stats
    assert sum(s.reassignments_completed for s in stats) >= 2, stats
    assert sum(s.controlled_shutdowns for s in stats) >= 2, stats
    assert sum(s.leader_moves for s in stats) >= 50, stats
    assert sum(s.image_snapshot_loads for s in stats) >= 2, stats
    # the active controller applies writes ahead of their commit, and goes back when it loses them
    assert sum(s.speculative_commits for s in stats) >= 20, stats
    more = [run_scenario(seed, "brokers") for seed in range(8, 24)]
    assert sum(s.reverts for s in stats + more) >= 1, more


def test_recorded_traces_cover_the_default_seeds() -> None:
    assert set(_recorded_traces()) >= set(range(500))
    assert set(_recorded_traces(BROKER_TRACES)) >= set(range(500))


def test_replay() -> None:
    """Replays one seed given by KWIRE_SIM_SEED (and optionally KWIRE_SIM_SCENARIO)."""
    raw = os.environ.get("KWIRE_SIM_SEED")
    if raw is None:
        pytest.skip("set KWIRE_SIM_SEED to replay one seed")
    stats = run_scenario(int(raw), os.environ.get("KWIRE_SIM_SCENARIO"))
    print(stats)


def test_simulation_is_deterministic() -> None:
    first = run_scenario(3)
    second = run_scenario(3)
    if os.environ.get("KWIRE_SIM_WIRE") == "1":
        # re-decoded messages hold memoryviews, whose repr (in the trace) is an address
        first.trace_digest = second.trace_digest = ""
    assert first == second


def test_invariant_checker_catches_two_leaders_in_one_epoch() -> None:
    """Positive control: a forged second leader for a persisted epoch must be reported."""
    from server.raft.types import ElectionState

    cluster = Cluster(7, voters=3)
    cluster.run_until(4000)
    leader = cluster.leader()
    assert leader is not None
    epoch = cluster.nodes[leader].core.epoch  # type: ignore[union-attr]
    other = next(i for i in cluster.voter_ids if i != leader)
    with pytest.raises(InvariantViolation, match="SingleLeader"):
        cluster.persist(cluster.nodes[other], ElectionState(epoch, other, None))


def test_invariant_checker_catches_lost_unflushed_commit() -> None:
    """Positive control: if a leader counted unflushed data toward the high watermark, a crash
    of every node would lose committed batches; the majority-durability check must see it."""
    cluster = Cluster(11, voters=3)
    cluster.start_workload(100, 3000)
    cluster.run_until(3000)
    assert cluster.committed_end > 0
    for node in cluster.nodes.values():
        node.log._flushed = 0  # forge: nothing was ever fsynced
        cluster.crash(node.node_id)
    with pytest.raises(InvariantViolation, match="durable"):
        cluster.check_committed_on_majority()


class _LyingLog(MemoryRaftLog):
    """A log whose fsync is a no-op that reports success: it claims everything appended is
    durable, but a crash still loses what was never really flushed."""

    @property
    def flushed_offset(self) -> int:
        return self.log_end_offset

    def complete_flush(self, token: tuple[int, int]) -> None:
        pass  # the "fsync" never reaches the disk


def _crash_everything(seed: int, log_factory: type[MemoryRaftLog] = _LyingLog) -> None:
    rng = random.Random(seed)
    cluster = Cluster(seed, voters=3, log_factory=log_factory)
    cluster.start_workload(20, 30_000)
    cluster.run_until(3000)
    for _ in range(6):
        for node_id in cluster.voter_ids:
            cluster.crash(node_id)
        for node_id in cluster.voter_ids:
            cluster.restart(node_id)
        cluster.run_until(cluster.now + rng.randint(1500, 3000))
    cluster.check_committed_on_majority()


def test_positive_control_lost_fsyncs_are_caught() -> None:
    """Positive control (the checks must catch a fault put in on purpose): with an fsync that
    does nothing, crashes lose acknowledged data, and the simulation's invariants must notice
    within a few seeds."""
    caught = 0
    for seed in range(10):
        try:
            _crash_everything(seed)
        except (InvariantViolation, AssertionError):
            caught += 1
    assert caught >= 5


def test_the_same_crashes_with_real_fsyncs_lose_nothing() -> None:
    for seed in range(5):
        _crash_everything(seed, MemoryRaftLog)


def test_every_message_the_cores_exchange_encodes_at_its_version() -> None:
    """Run quorums whose router encodes and decodes every request and response (Vote v2,
    BeginQuorumEpoch/EndQuorumEpoch v1, Fetch v17, FetchSnapshot v1, ApiVersions v3)."""
    for seed in range(3):
        cluster = Cluster(seed, voters=3, observers=1, wire=True, kraft_version=seed % 2, snapshot_every=5)
        cluster.start_workload(50, 4000)
        cluster.run_until(3000)
        leader = cluster.leader()
        assert leader is not None
        cluster.crash(leader)
        cluster.run_until(6000)
        cluster.restart(leader)
        cluster.run_until(9000)
        assert cluster.committed_end > 0
