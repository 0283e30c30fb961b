"""The election race after a leader's death, in the seeded simulation (``sim_elections``): kwire
wins its share against voters on Kafka's follower timer, and kwire-only quorums seldom split
their vote. Seeded, so a run's figures are the same every time; ``python -m
tests.raft.sim_elections --seeds 1000`` prints them over more seeds."""

from __future__ import annotations

import pytest

from tests.raft.sim_elections import summarize

pytestmark = pytest.mark.simulation
SEEDS = range(40)


def test_kwire_wins_its_share_against_kafka_s_follower_timer() -> None:
    """Node 1 (kwire) against two voters that wait exactly the fetch timeout: the one that times
    out second wins, which must be kwire about half the time (a window of deadlines that ended
    at the timeout made it nearly never)."""
    mixed = summarize("mixed", SEEDS)
    assert mixed.slot_wins >= mixed.elections / 3, mixed
    assert mixed.slot_wins <= 2 * mixed.elections / 3, mixed


def test_kwire_quorums_seldom_split_where_kafka_s_timer_does() -> None:
    """Three kwire voters split the vote after a leader's death far less often than three on
    Kafka's exact timer (the positive control: followers answered together time out together)."""
    kwire = summarize("kwire", SEEDS)
    stock = summarize("stock", SEEDS)
    assert stock.split >= 4, stock
    assert kwire.split <= stock.split / 2, (kwire, stock)
    assert kwire.median_ms <= 2200, kwire  # the fetch timeout, its window and a pre-vote
