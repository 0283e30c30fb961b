"""How fair the election race is for kwire against stock voters (``make nightly``, collected only
with ``KWIRE_MIXED_ELECTIONS`` set: ``make test`` neither runs nor skips it).

In a static or dynamic quorum of one kwire node (node 1) and two stock controllers, and in the
stock-only control with a stock controller in node 1's place, the stock leader is killed with
SIGKILL until node 1 was one of the two survivors ``KWIRE_MIXED_ELECTIONS`` times (30 in ``make
nightly``, about ten minutes per configuration). Over at least :data:`MIN_ELECTIONS` of them
kwire must win at least :data:`FAIR_SHARE_BOUND` (one half is fair; the stock control, printed
and not asserted, shows what the race gives a stock node there). When node 1 itself leads it
is stopped with SIGTERM (it resigns, and that election does not count) and restarted. Every
election is printed as (killed, elected, seconds). Why the race is fair is in
``QuorumState.fetch_deadline`` (the follower's fetch timeout window, centred on the timeout).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from compat.harness import ELECTION_BOUND_S, KafkaRelease, Quorum

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ELECTIONS = int(os.environ.get("KWIRE_MIXED_ELECTIONS", "0"))
"""Counted kills per configuration (module docstring)."""
MIN_ELECTIONS = 30
"""From this many counted elections on, kwire's share is asserted."""
SLOT = 1
"""The node whose share of elections is measured: kwire, or stock in the control."""
FAIR_SHARE_BOUND = 1 / 3
"""The least share of its elections node 1 must win (a fair race gives one half)."""
LOAD_INTERVAL_MS = 100
"""``metadata.max.idle.interval.ms``: the leader's steady NoOpRecords."""


def slot_share(elections: list[tuple[int, int, float]], slot: int = SLOT) -> tuple[int, int]:
    """(elections ``slot`` won, elections it took part in) of ``elections``, each (the leader
    killed, the leader elected after it, seconds): it takes part in every election after the
    kill of another leader."""
    taken = [winner for killed, winner, _ in elections if killed != slot]
    return sum(1 for winner in taken if winner == slot), len(taken)


@pytest.mark.parametrize("slot_kind", ["kwire", "stock"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_share_of_elections(each_kafka: KafkaRelease, tmp_path: Path, dynamic: bool, slot_kind: str) -> None:
    """Node 1 (kwire, or stock as the control) against two stock controllers: the share of the
    elections after a stock leader's SIGKILL that node 1 wins."""
    kwire_ids = {SLOT} if slot_kind == "kwire" else set()
    quorum = Quorum(each_kafka, tmp_path, kwire_ids, dynamic, extra=f"metadata.max.idle.interval.ms={LOAD_INTERVAL_MS}\n")
    elections: list[tuple[int, int, float]] = []
    config = f"{each_kafka.version} {'dynamic' if dynamic else 'static'} node {SLOT} {slot_kind}"

    def show() -> None:
        won, taken = slot_share(elections)
        print(f"\nelections {config}: node {SLOT} won {won} of {taken} (killed, elected, seconds): {elections}")

    with quorum.running(then=show):
        while len(elections) < ELECTIONS:
            quorum.settled_high_watermark()
            leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
            if leader == SLOT:  # hand leadership to a stock node; this election does not count
                quorum.kill(leader, signal.SIGTERM)
                quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
                quorum.start(leader)
                continue
            killed_at = time.monotonic()
            quorum.kill(leader)
            elected, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
            elections.append((leader, elected, round(time.monotonic() - killed_at, 1)))
            quorum.start(leader)
        final_hwm, logged = quorum.settle_after_faults()
    quorum.assert_agreed(final_hwm, logged)
    won, taken = slot_share(elections)
    if slot_kind == "kwire" and taken >= MIN_ELECTIONS:  # the stock control is Kafka's race
        assert won >= FAIR_SHARE_BOUND * taken, elections
