"""Mixed quorums: kwire nodes and stock controllers of each pinned release in one quorum.

Three voters, static (``controller.quorum.voters``, kraft.version 0; each directory formatted
by its own kind's ``storage format --no-initial-controllers``) or dynamic (KIP-853: every
directory formatted with the same ``--initial-controllers``, the nodes configured with
``controller.quorum.bootstrap.servers``): one kwire node and two stock controllers, then two
kwire nodes and one stock controller. Each leader appends a NoOpRecord every
``LOAD_INTERVAL_MS`` (``metadata.max.idle.interval.ms``, Kafka's 500 ms cut to a steady 10
records a second). The leader is stopped ``LEADER_CHANGES`` times, by SIGKILL and SIGTERM in
turn (a graceful leader resigns and sends EndQuorumEpoch), and restarted each time. Asserted:

* after every kill another voter leads within ``ELECTION_BOUND_S`` (the fetch timeout plus two
  election timeouts, plus slack for DescribeQuorum polling on a loaded machine); each kill waits
  until every voter is up and has reached the high watermark, so that the survivors are a
  fetching majority (a JVM restarted after the previous kill can take seconds to start);
* no process dies but the killed ones, and no stock controller logs a fatal fault while the
  quorum runs (a Vote, UpdateRaftVoter or Fetch answer it cannot take; a log it cannot load);
* the quorum's high watermark keeps moving after the last restart;
* once every voter has caught up and all are stopped, their logs hold the same batches, byte
  for byte, below the final high watermark;
* in a soak (``make nightly``), kwire and stock nodes each led at least three times.

Who wins each election is up to the race of timeouts; the leaders are printed. ``make test``
runs 3.9.2 static with two kwire nodes and 4.4.0 dynamic with one; ``make nightly`` runs both
modes and both mixes of both releases. Cost:
three processes (one or two JVMs) for ~20 s per configuration.

The share of elections each side wins is measured in ``compat/test_election_share.py``
(``make nightly``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from compat.harness import ELECTION_BOUND_S, KafkaRelease, Quorum

pytestmark = [pytest.mark.compat, pytest.mark.slow]

LEADER_CHANGES = int(os.environ.get("KWIRE_MIXED_LEADER_CHANGES", "3"))
"""Kills per configuration: 3 in ``make test`` (12 over the four configurations it runs), 100 in
``make nightly`` (over all eight)."""
SOAK_LEADER_CHANGES = 30
"""From this many kills on, kwire and stock nodes must each have led at least 3 times."""
LOAD_INTERVAL_MS = 100

ALL_MODES = os.environ.get("KWIRE_MIXED_ALL_MODES") == "1" or LEADER_CHANGES >= SOAK_LEADER_CHANGES
"""``make test`` runs each release in its own mode: 3.9.2 static (``controller.quorum.voters``),
4.x dynamic (KIP-853), each with one mix of nodes; ``make nightly`` (or
``KWIRE_MIXED_ALL_MODES=1``) runs both modes and both mixes on both releases."""


def test_leaders_killed_in_a_mixed_quorum(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """Each mix (one kwire node and two stock, two kwire and one stock) in each mode; ``make
    test`` runs one mix per release (3.9.2: two kwire nodes, static; 4.x: one kwire node,
    dynamic), ``make nightly`` all of them."""
    modes = [False, True] if ALL_MODES else [each_kafka.at_least(4, 0)]
    mixes = [{1}, {1, 2}] if ALL_MODES else [{1} if each_kafka.at_least(4, 0) else {1, 2}]
    for dynamic in modes:
        for kwire_ids in mixes:
            name = f"{'dynamic' if dynamic else 'static'}-{len(kwire_ids)}-kwire"
            _leaders_killed(each_kafka, tmp_path / name, kwire_ids, dynamic)


def _leaders_killed(kafka: KafkaRelease, tmp_path: Path, kwire_ids: set[int], dynamic: bool) -> None:
    tmp_path.mkdir()
    quorum = Quorum(kafka, tmp_path, kwire_ids, dynamic, extra=f"metadata.max.idle.interval.ms={LOAD_INTERVAL_MS}\n")
    leaders: list[tuple[int, float]] = []
    with quorum.running(then=lambda: print("leaders after each kill (id, seconds):", leaders)):
        for change in range(LEADER_CHANGES):
            # the bound holds for a quorum whose other voters are up and fetching: a JVM still
            # starting (at first, or restarted after the last kill) is not yet one of them
            quorum.settled_high_watermark()
            leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
            killed_at = time.monotonic()
            quorum.procs[leader].send_signal(signal.SIGKILL if change % 2 == 0 else signal.SIGTERM)
            quorum.procs[leader].wait(60)
            new_leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
            leaders.append((new_leader, round(time.monotonic() - killed_at, 1)))
            quorum.start(leader)
        final_hwm, logged = quorum.settle_after_faults()
    quorum.assert_agreed(final_hwm, logged)
    if LEADER_CHANGES >= SOAK_LEADER_CHANGES:
        # over a soak both kinds must win elections: neither side loses every race
        kwire_wins = sum(1 for leader, _ in leaders if leader in kwire_ids)
        assert kwire_wins >= 3 and len(leaders) - kwire_wins >= 3, leaders

