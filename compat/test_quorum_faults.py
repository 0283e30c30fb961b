"""Network and process faults on a three-voter controller quorum: kwire beside stock Kafka
under the same nemesis, in the same run (``compat/faults/rounds.py`` holds the rounds, the
nemeses and what each round checks; ``compat/faults/history.py`` the client's history and its
checker).

Per configuration, one round of each nemesis -- ``pause`` and ``pause-follower`` (SIGSTOP and
SIGCONT), ``kill-leader`` (kill -9, restarted at the heal), ``isolate-leader``, ``one-way`` and
``bridge`` (network cuts), on 4.x ``remove-partitioned`` (a follower cut off, removed from
the voter set meanwhile and added back at the heal), ``slow-link`` (the leader's sending
rate-limited, the excess queued or dropped) and ``slow-disk`` (each of the leader's fsyncs a
second late) and ``pause-broker`` (SIGSTOP of a stock broker until it is fenced), and on kwire
quorums the nemeses built from kwire's failpoints (``compat/faults/failpoints.py``:
``slow-commit``, ``append-refused``, ``not-controller``, ``fetch-drop``, ``heartbeat-delay``;
stock Kafka has no such switch) -- while a
client writes a broker config, one write at a time, to whichever node is the active
controller, and three stock brokers of the release serve the controller workload of
``compat/faults/cluster.py``: a producer (idempotent, ``acks=all``) and an admin that creates
and deletes topics, alters a topic config and reassigns a partition through the brokers.
Asserted: every round's election, step-down and catch-up within their bounds, and the paused
broker fenced and back; never two leaders in one epoch; no process died and no stock
controller logged a fatal fault; the logs identical below the final high watermark; the
client's history passes the checker -- no acknowledged write lost or committed twice, none
committed against real-time order, nothing committed that the client did not send; and the
controller workload's passes its own -- no acknowledged admin request missing from a voter's
log or committed out of order, no deleted topic back, every created topic described by a fresh
kafka-python client within its bound, the brokers' final topics those of the log, and every
acknowledged record read back exactly once.

The positive controls run kwire with the test-only ``kwire.unsafe.test.ack.on.append`` (a
write answered before it commits) under ``isolate-leader``: without brokers, the history
checker must name the acknowledged write it lost; with brokers and the admin alone writing,
the controller workload's checker must name the acknowledged admin request it lost.

Configurations: ``kwire`` (three kwire nodes) and ``stock-<newest>`` (three stock controllers,
the control); with ``KWIRE_FAULT_ALL_CONFIGS=1`` (``make nightly``) also the mixes of one and
two kwire nodes on every pinned release and the kwire and stock quorums of the older one (3.x
static, 4.x dynamic), each with its release's brokers: ``kwire-3.9.2`` under ``kill-leader`` is
the case a new user once reported (a topic created through a 3.9.2 broker after the active
controller's kill, then not described for 30 s), which the workload's describe probe times.
``KWIRE_FAULT_ROUNDS`` rounds per configuration drawn at random from ``KWIRE_FAULT_SEED``,
printed, so a run replays (default: one of each nemesis, in order; ``make test`` one of each of
:data:`COVER`, on both configurations, the same nemeses on kwire and on stock). ``make test``'s
share: two configurations of five rounds with their brokers (ten rounds took 71 and 85 s) and
the history checker's positive control (8 s), on two workers; the controller workload's positive
control (33-42 s, three stock brokers) runs in ``make nightly``. The
soak (``python -m compat.faults``) draws configurations and nemeses for a given time and
prints a table per nemesis and configuration.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from compat import kafka as _kafka
from compat.faults import report
from compat.faults.rounds import QUORUM_IDS, Run, available_nemeses, configurations, run_faults
from compat.harness import KafkaRelease, newest_pinned_release

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROUNDS = int(os.environ.get("KWIRE_FAULT_ROUNDS", "0"))
"""Rounds per configuration; 0 (the default): one of each nemesis of :data:`COVER` (with
``KWIRE_FAULT_ALL_CONFIGS=1``, of every nemesis the release can take)."""
SEED = int(os.environ.get("KWIRE_FAULT_SEED", "1"))
ALL_CONFIGS = os.environ.get("KWIRE_FAULT_ALL_CONFIGS") == "1"
COVER = ("kill-leader", "isolate-leader", "bridge", "remove-partitioned", "pause-broker")
"""``make test``'s share of the nemeses, one of each kind: a process killed, a leader cut off, a
partial partition, the voter set changed under a partition, a broker stopped. The others
(``pause``, ``pause-follower``, ``one-way``, ``slow-link``, ``slow-disk``) run in ``make
nightly``, with every configuration, and so do the failpoint nemeses: one round of the
cheapest, ``not-controller``, added 4.6 CPU-s and 22 s of wall time to a ``kwire+brokers`` quorum
(``python -m compat.faults --configs kwire+brokers --each --nemeses pause-follower`` against
``pause-follower,not-controller``: 31.4 against 36.0 CPU-s, 62 against 84 s), and all five
together took 51 CPU-s and 90 s on one quorum."""


@pytest.mark.parametrize(("release", "kwire_ids"),
                         [pytest.param(v, ids, id=name) for name, v, ids in configurations(ALL_CONFIGS)])
def test_quorum_under_network_and_process_faults(release: str, kwire_ids: frozenset[int], tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    _kafka.require_kafka(release)
    kafka = KafkaRelease(release)
    choices = available_nemeses(kafka, brokers=True, kwire=kwire_ids >= QUORUM_IDS)
    draw = random.Random(SEED)
    if ROUNDS:
        nemeses = [draw.choice(choices) for _ in range(ROUNDS)]
    else:
        nemeses = [n for n in choices if ALL_CONFIGS or n in COVER]
    print(f"seed {SEED}: {nemeses}")
    seen: list[Run] = []
    # on failure, the plots of what the run saw: the exception's note names the report's index.html
    with report.on_failure(seen, request.node.callspec.id, tmp_path / "report", seed=SEED):
        run = run_faults(kafka, kwire_ids, tmp_path, nemeses, brokers=True, seen=seen)
        assert run.verdict is not None and run.verdict.acknowledged > 0 and run.verdict.ok, run.verdict
        cluster = run.cluster
        assert cluster is not None and cluster.acknowledged > 0 and cluster.records_acknowledged > 0, cluster
        assert cluster.ok, cluster


def test_the_checker_catches_a_leader_that_acknowledges_before_commit(tmp_path: Path) -> None:
    """Positive control: kwire nodes with the test-only ``kwire.unsafe.test.ack.on.append``
    answer a write once appended; a leader cut off from the other voters (``isolate-leader``)
    acknowledges a write that never commits, and the checker names it lost."""
    kafka = newest_pinned_release()
    _kafka.require_kafka(kafka.version)
    run = run_faults(kafka, frozenset({1, 2, 3}), tmp_path, ["isolate-leader"],
                     kwire_extra="kwire.unsafe.test.ack.on.append=true\n")
    assert run.verdict is not None and run.verdict.lost, f"the checker missed the unsafe acknowledgements: {run.verdict}"


@pytest.mark.skipif(not ALL_CONFIGS, reason="make nightly: three stock brokers for one positive control (about 35 s)")
def test_the_admin_checker_catches_a_leader_that_acknowledges_before_commit(tmp_path: Path) -> None:
    """Positive control of the controller workload's checker: under the same switch and
    nemesis, with stock brokers forwarding the admin's requests to the isolated leader, an
    acknowledged request never commits and the checker names it lost. Only the admin's topic
    and config requests write here (``writes=False``: no config writer, no partition moves,
    whose ISR changes the brokers write): kwire's controller holds each write until the writes
    before it commit, so only the first write the isolated leader takes is acknowledged, and it
    must be the admin's."""
    kafka = newest_pinned_release()
    _kafka.require_kafka(kafka.version)
    run = run_faults(kafka, frozenset({1, 2, 3}), tmp_path, ["isolate-leader"], brokers=True, writes=False,
                     kwire_extra="kwire.unsafe.test.ack.on.append=true\n")
    assert run.cluster is not None and run.cluster.lost, f"the checker missed the unsafe acknowledgements: {run.cluster}"
