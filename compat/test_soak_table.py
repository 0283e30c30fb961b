"""The soak's table (``python -m compat.faults``): rounds, acknowledged and lost writes are
counted per nemesis and configuration from made-up runs, and a round that did not recover
counts as failed."""

from __future__ import annotations

from typing import Any

from compat.faults.__main__ import BETWEEN, RECORDS, _account, _figures, table_rows
from compat.faults.cluster import AdminOp, ClusterVerdict
from compat.faults.history import FIRST_VALUE, Op, check
from compat.faults.rounds import Round, Run


def _rows() -> dict[tuple[str, str], dict[str, Any]]:
    return table_rows()


def _run(rounds: list[Round], ops: list[Op], committed: list[int]) -> Run:
    run = Run(quorum=None, network=None)  # type: ignore[arg-type]
    run.rounds, run.ops = rounds, ops
    run.verdict = check(ops, {1: committed, 2: committed, 3: committed})
    return run


def test_writes_are_counted_in_the_round_they_were_invoked_in() -> None:
    pause = Round("pause", leader=1, epoch=1, started_s=0.0, ended_s=10.0, figures={"recovered_s": 0.5})
    cut = Round("one-way", leader=2, epoch=2, started_s=10.0, ended_s=20.0, figures={"recovered_s": 1.5})
    ops = [Op(FIRST_VALUE, 1, 1.0, 2.0, "ok"), Op(FIRST_VALUE + 1, 1, 11.0, 12.0, "ok"),
           Op(FIRST_VALUE + 2, 1, 13.0, 14.0, "ok"), Op(FIRST_VALUE + 3, 1, 25.0, 26.0, "ok")]
    rows = _rows()
    _account(rows, "kwire", ["pause", "one-way"], _run([pause, cut], ops, [FIRST_VALUE, FIRST_VALUE + 1,
                                                                          FIRST_VALUE + 3]), "")
    assert _figures(rows[("kwire", "pause")]) == {
        "rounds": 1, "acknowledged": 1, "lost": 0, "diverged": 0, "failed_rounds": 0,
        "recovery_median_s": 0.5, "recovery_max_s": 0.5, "note": ""}
    one_way = _figures(rows[("kwire", "one-way")])
    assert (one_way["acknowledged"], one_way["lost"], one_way["recovery_max_s"]) == (2, 1, 1.5)
    between = _figures(rows[("kwire", BETWEEN)])  # the write after the last round's recovery
    assert (between["rounds"], between["acknowledged"], between["lost"]) == (0, 1, 0)


def test_a_write_lost_between_rounds_is_counted() -> None:
    pause = Round("pause", leader=1, epoch=1, started_s=5.0, ended_s=10.0, figures={"recovered_s": 0.5})
    ops = [Op(FIRST_VALUE, 1, 1.0, 2.0, "ok"), Op(FIRST_VALUE + 1, 1, 6.0, 7.0, "ok")]
    rows = _rows()
    _account(rows, "kwire", ["pause"], _run([pause], ops, [FIRST_VALUE + 1]), "")
    assert _figures(rows[("kwire", BETWEEN)])["lost"] == 1
    assert _figures(rows[("kwire", "pause")])["lost"] == 0


def test_a_round_that_did_not_recover_and_a_quorum_that_never_started_count_as_failed() -> None:
    stuck = Round("kill-leader", leader=1, epoch=1, started_s=0.0)
    rows = _rows()
    _account(rows, "stock-4.4.0", ["kill-leader", "pause"], _run([stuck], [], []), "AssertionError: ...")
    assert _figures(rows[("stock-4.4.0", "kill-leader")])["failed_rounds"] == 1
    assert ("stock-4.4.0", "pause") not in rows  # never reached
    _account(rows, "kwire", ["bridge"], None, "TimeoutError: no leader")
    assert _figures(rows[("kwire", "bridge")])["failed_rounds"] == 1
    assert _figures(rows[("kwire", "bridge")])["rounds"] == 1


def test_the_controller_workload_counts_in_the_rounds_and_its_records_in_a_row_of_their_own() -> None:
    pause = Round("pause-broker", leader=1, epoch=1, started_s=0.0, ended_s=10.0, figures={"recovered_s": 0.5})
    run = _run([pause], [], [])
    run.admin_ops = [AdminOp("create", "w-00000", None, 101, 1.0, 2.0, "ok", visible_s=0.1),
                     AdminOp("create", "w-00001", None, 101, 3.0, 4.0, "ok", visible_s=0.1),
                     AdminOp("config", "moves", 9, 101, 5.0, 6.0, "unknown")]
    run.cluster = ClusterVerdict(acknowledged=2, failed=0, unknown=1, records_acknowledged=100,
                                 lost=["create w-00001 (node 2)"], records=["acked-3 read 0 times"])
    rows = _rows()
    _account(rows, "kwire+brokers", ["pause-broker"], run, "")
    paused = _figures(rows[("kwire+brokers", "pause-broker")])
    assert (paused["acknowledged"], paused["lost"], paused["failed_rounds"]) == (2, 1, 0)
    records = _figures(rows[("kwire+brokers", RECORDS)])
    assert (records["rounds"], records["acknowledged"], records["lost"]) == (0, 100, 1)
