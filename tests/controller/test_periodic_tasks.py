"""The periodic tasks (``server.controller.periodic_tasks``): their schedule on and off the
active controller, the write gate, and what a writing task does with the gate's answer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from messages.generated.no_op_record import NoOpRecord
from server.controller import periodic_tasks
from server.controller.controller import ControlManagers
from server.controller.operation_context import ControllerConfig, OperationContext
from server.controller.periodic_tasks import RETRY_AFTER_WRITE_MS, PeriodicTasks, may_write
from server.controller.result import Record
from tests.controller.fixtures import RecordingLog


class Fixture:
    """Tasks over an empty controller; the gate, the context and the writes are recorded."""

    def __init__(self, **overrides: Any) -> None:
        values: dict[str, Any] = {"node_id": 1, "cluster_id": "tasks-test", "static_config": {},
                                  "session_timeout_ms": 8000, "max_idle_interval_ms": 500}
        values.update(overrides)
        self.config = ControllerConfig(**values)
        self.controller = ControlManagers(bootstrap=(), min_insync_replicas=1, cluster_id="tasks-test",
                                           session_timeout_ms=self.config.session_timeout_ms)
        self.open = True
        self.contexts = 0
        self.writes: list[list[Record]] = []
        self.no_ops = 0
        self.log = RecordingLog()
        self.tasks = PeriodicTasks(self.config, self.controller, self.log, gate=lambda: self.open,
                                   context=self.context, write=self.writes.append, write_no_op=self.no_op)

    def context(self, now_ms: int) -> OperationContext:
        self.contexts += 1
        return cast(OperationContext, SimpleNamespace(controller=self.controller, cluster=self.controller.cluster,
                                                     metadata_version=None, partition_effects=None))

    def no_op(self) -> None:
        self.no_ops += 1


def test_the_gate_opens_only_on_the_active_controller_with_few_uncommitted_records() -> None:
    assert may_write(blocked=False, requests_waiting=False, active=True, uncommitted=0)
    assert may_write(blocked=False, requests_waiting=False, active=True, uncommitted=-4), "nothing pending"
    assert not may_write(blocked=True, requests_waiting=False, active=True, uncommitted=0)
    assert not may_write(blocked=False, requests_waiting=True, active=True, uncommitted=0)
    assert not may_write(blocked=False, requests_waiting=False, active=False, uncommitted=0)
    limit = periodic_tasks.MAX_UNCOMMITTED_TASK_RECORDS
    assert may_write(blocked=False, requests_waiting=False, active=True, uncommitted=limit)
    assert not may_write(blocked=False, requests_waiting=False, active=True, uncommitted=limit + 1)


def test_activation_schedules_every_task_by_its_interval_and_poll_the_no_op() -> None:
    fixture = Fixture(leader_imbalance_check_interval_ms=300, unclean_leader_election_interval_ms=700)
    tasks = fixture.tasks
    assert tasks.next_deadline_ms() is None
    tasks.activate(1000)
    assert tasks.session_expiry.next_ms == 2000, "session timeout / 8"
    assert tasks.leader_balance.next_ms == 1300 and tasks.unclean_election.next_ms == 1700
    assert tasks.token_sweep.next_ms == 1000 + fixture.config.tokens.expiry_check_interval_ms
    assert tasks.no_op.next_ms is None
    tasks.poll(1000, claimed=True, run=True)
    assert tasks.no_op.next_ms == 1500 and tasks.next_deadline_ms() == 1300


def test_no_rebalance_is_scheduled_without_auto_leader_rebalance() -> None:
    fixture = Fixture(auto_leader_rebalance_enable=False)
    fixture.tasks.activate(0)
    assert fixture.tasks.leader_balance.next_ms is None


def test_off_the_claimed_controller_every_task_is_unscheduled() -> None:
    fixture = Fixture()
    fixture.tasks.activate(0)
    fixture.tasks.poll(0, claimed=True, run=True)
    fixture.tasks.poll(10_000, claimed=False, run=True)
    assert all(task.next_ms is None for task in fixture.tasks.tasks)
    assert fixture.tasks.next_deadline_ms() is None and fixture.no_ops == 0


def test_due_tasks_run_in_order_only_when_asked_to() -> None:
    fixture = Fixture()
    tasks = fixture.tasks
    tasks.poll(0, claimed=True, run=True)
    tasks.poll(500, claimed=True, run=False)
    assert fixture.no_ops == 0 and tasks.no_op.next_ms == 500, "due, but not run in this poll"
    tasks.poll(500, claimed=True, run=True)
    assert fixture.no_ops == 1 and tasks.no_op.next_ms == 1000


def test_a_writing_task_waits_for_the_gate_without_looking_at_the_image() -> None:
    fixture = Fixture()
    fixture.open = False
    found = fixture.tasks.run_writing(0, lambda ctx: ([(NoOpRecord(), 0)], False), 1234)
    assert found == RETRY_AFTER_WRITE_MS and fixture.contexts == 0 and fixture.writes == []


def test_a_writing_task_writes_its_records_as_one_batch_and_logs_them() -> None:
    fixture = Fixture()
    records: list[Record] = [(NoOpRecord(), 0), (NoOpRecord(), 0)]
    assert fixture.tasks.run_writing(0, lambda ctx: (records, False), 1234, "writing %d records") == 1234
    assert fixture.writes == [records] and fixture.log.lines == ["writing 2 records"]
    assert fixture.tasks.run_writing(0, lambda ctx: ([], True), 1234) == 0, "again at once when asked"
    assert len(fixture.writes) == 1, "nothing to write: no batch"


def test_the_session_check_runs_at_the_session_period_without_brokers() -> None:
    fixture = Fixture()
    fixture.controller.cluster.activate(0)  # the sessions of the active controller
    tasks = fixture.tasks
    tasks.activate(0)
    tasks.poll(1000, claimed=True, run=True)
    assert tasks.session_expiry.next_ms == 2000 and fixture.writes == []
    fixture.open = False
    tasks.poll(2000, claimed=True, run=True)
    assert tasks.session_expiry.next_ms == 2000 + RETRY_AFTER_WRITE_MS
