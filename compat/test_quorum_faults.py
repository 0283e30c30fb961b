"""Network and process faults on a three-voter controller quorum: kwire beside stock Kafka
under the same nemesis, in the same run.

Each node runs in a network namespace of its own on a private bridge (``compat/faults/net.py``);
the test asks the quorum from a client namespace on the same bridge. Each leader appends a
NoOpRecord every ``LOAD_INTERVAL_MS``. A round finds the leader, applies a nemesis for
``HOLD_S`` (the fetch timeout and half a second), heals it, and waits for the quorum to settle:

* ``pause``: SIGSTOP on the leader, then SIGCONT -- it wakes up believing it still leads;
* ``isolate-leader``: the leader cut off from both other voters, both ways (the client still
  reaches everyone);
* ``one-way``: what the leader sends to the other voters is dropped; what they send arrives;
* ``bridge``: the leader cut off from one follower only; the other follower sees both.

Asserted, for every configuration:

* under ``pause``, ``isolate-leader`` and ``one-way``, another voter leads within
  ``ELECTION_BOUND_S``; after the heal, the old leader answers with a later epoch within
  ``ELECTION_BOUND_S`` (it stopped claiming its old one);
* no two nodes ever answered as leader of the same epoch (every DescribeQuorum answer the test
  saw, through every node, is kept);
* after each heal every voter reaches the high watermark within 60 s (the recovery time is
  printed), and it moves after the last round;
* no process died, no stock controller logged a fatal fault; once all caught up, the logs hold
  the same batches, byte for byte, below the final high watermark;
* a client writing a broker config through the rounds, one write at a time to whichever node
  is the active controller (``compat/faults/history.py``), lost no acknowledged write: every
  voter's committed log holds each one once, in an order that agrees with real time, and
  nothing was committed that the client did not send. The positive control runs kwire with the
  test-only ``kwire.unsafe.test.ack.on.append`` (a write answered before it commits) under
  ``isolate-leader``, and the checker must name the acknowledged writes it lost.

Configurations: ``kwire`` (three kwire nodes) and ``stock-<newest>`` (three stock controllers,
the control); with ``KWIRE_FAULT_ALL_CONFIGS=1`` (``make nightly``) also the mixes of one and
two kwire nodes and the stock quorum of every pinned release (3.x static, 4.x dynamic).
``KWIRE_FAULT_ROUNDS`` rounds per configuration (default: one of each nemesis, in order); more
rounds draw the nemesis at random from ``KWIRE_FAULT_SEED``, printed, so a run replays. ``make
test``'s share: two configurations of four rounds, 20-30 s each, on two workers.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from compat import kafka as _kafka
from compat.faults.history import ConfigWrites, Verdict, check, committed_values
from compat.faults.net import Network
from compat.harness import (
    ELECTION_BOUND_S,
    FETCH_TIMEOUT_MS,
    KafkaRelease,
    Quorum,
    newest_pinned_release,
    wait_until,
)
from tools.quorum_client import QuorumToolError

pytestmark = [pytest.mark.compat, pytest.mark.slow]

NEMESES = ("pause", "isolate-leader", "one-way", "bridge")
ELECTING = {"pause", "isolate-leader", "one-way"}
"""The nemeses under which the old leader cannot keep a majority: another voter must lead."""
ROUNDS = int(os.environ.get("KWIRE_FAULT_ROUNDS", str(len(NEMESES))))
SEED = int(os.environ.get("KWIRE_FAULT_SEED", "1"))
ALL_CONFIGS = os.environ.get("KWIRE_FAULT_ALL_CONFIGS") == "1"
HOLD_S = FETCH_TIMEOUT_MS / 1000 + 0.5
LOAD_INTERVAL_MS = 100
CATCH_UP_S = 60.0


def _configurations() -> list[tuple[str, str, frozenset[int]]]:
    """``(id, release, kwire node ids)`` of the configurations this run covers."""
    newest = newest_pinned_release().version
    configs = [("kwire", newest, frozenset({1, 2, 3})), (f"stock-{newest}", newest, frozenset())]
    if ALL_CONFIGS:
        for version in _kafka.PINNED_VERSIONS:
            configs += [(f"mixed-{version}-1-kwire", version, frozenset({1})),
                        (f"mixed-{version}-2-kwire", version, frozenset({1, 2}))]
            if version != newest:
                configs.append((f"stock-{version}", version, frozenset()))
    return configs


@dataclass
class Run:
    """What one configuration's rounds saw."""

    quorum: Quorum
    network: Network
    leaders_of: dict[int, set[int]] = field(default_factory=dict)
    """epoch -> every node seen answering as its leader"""
    rounds: list[dict[str, object]] = field(default_factory=list)

    def observe(self, i: int) -> tuple[int, int, int] | None:
        """``(leader, epoch, high watermark)`` of the answer reached through node ``i`` (None
        when none came within 3 s); its leader is noted for its epoch."""
        try:
            view = self.quorum.describe(i)
        except (OSError, QuorumToolError, trio.TooSlowError):
            return None
        p = view.partition
        if p.leader_id >= 0:
            self.leaders_of.setdefault(p.leader_epoch, set()).add(p.leader_id)
        return p.leader_id, p.leader_epoch, p.high_watermark


def _round(run: Run, nemesis: str) -> None:
    quorum, net = run.quorum, run.network
    quorum.settled_high_watermark()
    leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S)
    run.leaders_of.setdefault(epoch, set()).add(leader)
    others = [i for i in quorum.ports if i != leader]

    def resume() -> None:
        quorum.procs[leader].send_signal(signal.SIGCONT)

    heal: Callable[[], None] = net.heal
    if nemesis == "pause":
        quorum.procs[leader].send_signal(signal.SIGSTOP)
        heal = resume
    elif nemesis == "isolate-leader":
        net.partition([str(leader)], [str(i) for i in others])
    elif nemesis == "one-way":
        for i in others:
            net.cut(str(leader), str(i))
    elif nemesis == "bridge":
        net.partition([str(leader)], [str(others[0])])
    else:
        raise ValueError(nemesis)
    started = time.monotonic()
    report: dict[str, object] = {"nemesis": nemesis, "leader": leader, "epoch": epoch}
    try:
        if nemesis in ELECTING:
            def elsewhere() -> tuple[int, int, int] | None:
                return next((c for c in map(run.observe, others) if c and c[0] not in (leader, -1)), None)

            new = wait_until(f"another voter to lead ({nemesis})", elsewhere, ELECTION_BOUND_S, interval_s=0.1)
            assert new[1] > epoch, (new, epoch)
            report["new_leader"], report["election_s"] = new[0], round(time.monotonic() - started, 1)
        else:
            for i in quorum.ports:
                run.observe(i)
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - started)))
    finally:
        heal()
    healed, healed_ms = time.monotonic(), time.time_ns() // 1_000_000
    if nemesis in ELECTING:
        wait_until(f"node {leader} to answer with an epoch after {epoch}", lambda: run.observe(leader),
                   ELECTION_BOUND_S, interval_s=0.1, ok=lambda c: c is not None and c[1] > epoch)
        report["step_down_s"] = round(time.monotonic() - healed, 1)
    _, _, hwm = quorum.wait_leader(ELECTION_BOUND_S)
    wait_until(f"every voter at offset {hwm} after the heal", lambda: quorum.voters_caught_up(hwm, healed_ms), CATCH_UP_S)
    report["recovered_s"] = round(time.monotonic() - healed, 1)
    run.rounds.append(report)


def _faulted(release: str, kwire_ids: frozenset[int], root: Path, nemeses: list[str], extra: str = "") -> Verdict:
    """Run ``nemeses`` on a quorum of ``release`` whose nodes ``kwire_ids`` are kwire's (their
    properties get ``extra``) while the client writes; check the rounds and the logs, and
    return the history's verdict."""
    kafka = KafkaRelease(release)
    with Network(["1", "2", "3", "client"], tag=f"q{os.getpid() % 1000}") as net:
        quorum = Quorum(kafka, root, set(kwire_ids), dynamic=kafka.at_least(4, 0), network=net,
                        extra=f"metadata.max.idle.interval.ms={LOAD_INTERVAL_MS}\n", kwire_extra=extra)
        run = Run(quorum, net)
        writes = ConfigWrites({i: (quorum.hosts[i], quorum.ports[i]) for i in quorum.ports})
        client = threading.Thread(target=net.call, args=("client", writes.run), daemon=True)
        with quorum.running(then=lambda: print(*run.rounds, sep="\n")):
            client.start()
            try:
                for nemesis in nemeses:
                    _round(run, nemesis)
            finally:
                writes.stop()
                client.join(timeout=30)
            final_hwm, logged = quorum.settle_after_faults()
    two = {epoch: ids for epoch, ids in run.leaders_of.items() if len(ids) > 1}
    assert not two, f"two leaders in one epoch: {two}"
    quorum.assert_agreed(final_hwm, logged)
    verdict = check(writes.ops, {i: committed_values(quorum.root / f"data{i}", final_hwm) for i in quorum.ports})
    print(f"history: {verdict.summary()}")
    return verdict


@pytest.mark.parametrize(("release", "kwire_ids"), [pytest.param(v, ids, id=name) for name, v, ids in _configurations()])
def test_quorum_under_network_and_process_faults(release: str, kwire_ids: frozenset[int], tmp_path: Path) -> None:
    _kafka.require_kafka(release)
    draw = random.Random(SEED)
    nemeses = [NEMESES[r % len(NEMESES)] if ROUNDS <= len(NEMESES) else draw.choice(NEMESES) for r in range(ROUNDS)]
    print(f"seed {SEED}: {nemeses}")
    verdict = _faulted(release, kwire_ids, tmp_path, nemeses)
    assert verdict.acknowledged > 0 and verdict.ok, verdict.summary()


def test_the_checker_catches_a_leader_that_acknowledges_before_commit(tmp_path: Path) -> None:
    """Positive control: kwire nodes with the test-only ``kwire.unsafe.test.ack.on.append``
    answer a write once appended; a leader cut off from the other voters (``isolate-leader``)
    acknowledges a write that never commits, and the checker names it lost."""
    release = newest_pinned_release().version
    _kafka.require_kafka(release)
    verdict = _faulted(release, frozenset({1, 2, 3}), tmp_path, ["isolate-leader"],
                       extra="kwire.unsafe.test.ack.on.append=true\n")
    assert verdict.lost, f"the checker missed the unsafe acknowledgements: {verdict.summary()}"
