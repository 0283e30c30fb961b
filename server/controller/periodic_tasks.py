"""The active controller's periodic tasks and their write gate: Kafka's
``PeriodicTaskControlManager`` with the tasks ``QuorumController`` registers on it.

On the active controller only (the tasks are unscheduled elsewhere):

* a NoOpRecord every ``metadata.max.idle.interval.ms`` (``maybeScheduleNextWriteNoOpRecord``),
  so that the high watermark of an idle quorum advances and followers see the leader live;
* every ``broker.session.timeout.ms`` / 8 (or when the oldest session ends, if sooner) the
  fencing of one broker whose session expired (``registerMaybeFenceStaleBroker``), again at
  once after one was found;
* every ``leader.imbalance.check.interval.seconds`` with ``auto.leader.rebalance.enable`` the
  preferred-leader elections (``maybeBalancePartitionLeaders``), a slice of a pass at a time;
* every ``unclean.leader.election.interval.ms`` the unclean elections for leaderless partitions
  of topics that allow them (the electUnclean task);
* every ``delegation.token.expiry.check.interval.ms`` the removal of expired delegation tokens
  (``sweepExpiredDelegationTokens``).

A task that writes asks the gate first (:func:`may_write`): it runs 10 ms later instead while
requests wait behind the write barrier, while this node is not the active controller with a
metadata.version, or while more than :data:`MAX_UNCOMMITTED_TASK_RECORDS` of its records are
uncommitted. An election task that hit its bound runs again at once. The tasks read the clock
they are given and write through the callables they are given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from server.controller import elections
from server.controller.controller import ControlManagers
from server.controller.operation_context import ControllerConfig, ControllerLog, OperationContext
from server.controller.result import Record

__all__ = [
    "MAX_ELECTIONS_PER_IMBALANCE",
    "MAX_UNCOMMITTED_TASK_RECORDS",
    "RETRY_AFTER_WRITE_MS",
    "PeriodicTask",
    "PeriodicTasks",
    "may_write",
]

MAX_ELECTIONS_PER_IMBALANCE = 1000
"""Elections one periodic election task writes at most (``maxElectionsPerImbalance``)."""

RETRY_AFTER_WRITE_MS = 10
"""How long a periodic task that writes waits when it may not write yet."""

MAX_UNCOMMITTED_TASK_RECORDS = 10_000
"""A periodic task that writes waits while more than this many records of the active
controller's are uncommitted (one user operation's worth, ``MAX_RECORDS_PER_USER_OP``): the
fencing of a third of 1,000 brokers (3,000 partition changes each at 10^6 partitions) would
otherwise run as far ahead of the followers as the leader's CPU allows, and the followers,
replaying on the same two cores, miss their fetch timeouts."""

FindRecords = Callable[[OperationContext], tuple[list[Record], bool]]
"""A writing task's body: the records to write and whether to run again at once."""


def may_write(*, blocked: bool, requests_waiting: bool, active: bool, uncommitted: int) -> bool:
    """The write gate of the periodic tasks: not while requests must wait for every write to
    commit (``blocked``) or wait at all (``requests_waiting``), only on the ``active``
    controller, and not while more than :data:`MAX_UNCOMMITTED_TASK_RECORDS` records are
    ``uncommitted``."""
    return not (blocked or requests_waiting or not active or uncommitted > MAX_UNCOMMITTED_TASK_RECORDS)


@dataclass(slots=True)
class PeriodicTask:
    """A periodic task: when it runs next (None: not scheduled), and what it does; ``run``
    returns the delay to its next run in ms."""

    name: str
    run: Callable[[int], int]
    next_ms: int | None = None


class PeriodicTasks:
    """The tasks of one controller (module docstring). ``gate`` is :func:`may_write` applied to
    the host's state now; ``context`` gives a task's :class:`OperationContext`; ``write``
    appends a task's records as one batch; ``write_no_op`` appends a NoOpRecord."""

    def __init__(
        self,
        config: ControllerConfig,
        controller: ControlManagers,
        log: ControllerLog,
        *,
        gate: Callable[[], bool],
        context: Callable[[int], OperationContext],
        write: Callable[[list[Record]], None],
        write_no_op: Callable[[], None],
    ) -> None:
        self.config = config
        self.controller = controller
        self.log = log
        self._gate = gate
        self._context = context
        self._write = write
        self._write_no_op = write_no_op
        self.balance_walk: elections.BalanceWalk | None = None
        """The rebalance's pass in progress."""
        self.no_op = PeriodicTask("no-op", self._append_no_op)
        self.session_expiry = PeriodicTask("session expiry", self._fence_stale_broker)
        self.leader_balance = PeriodicTask("leader balance", self._balance_leaders)
        self.unclean_election = PeriodicTask("unclean election", self._elect_unclean_leaders)
        self.token_sweep = PeriodicTask("delegation token expiry", self._expire_tokens)
        self.tasks = (self.no_op, self.session_expiry, self.leader_balance, self.unclean_election,
                      self.token_sweep)

    def activate(self, now_ms: int) -> None:
        """This node became the active controller at ``now_ms``: schedule every task but the
        NoOp (:meth:`poll` schedules that one); a rebalance pass of an earlier epoch starts
        afresh."""
        config = self.config
        self.session_expiry.next_ms = now_ms + max(1, config.session_timeout_ms // 8)
        self.leader_balance.next_ms = (
            now_ms + config.leader_imbalance_check_interval_ms if config.auto_leader_rebalance_enable else None
        )
        self.balance_walk = None
        self.unclean_election.next_ms = now_ms + config.unclean_leader_election_interval_ms
        self.token_sweep.next_ms = now_ms + config.tokens.expiry_check_interval_ms

    def poll(self, now_ms: int, *, claimed: bool, run: bool) -> None:
        """Off the claimed controller unschedule every task; on it (``run``) run those due, in
        order, and schedule the NoOp if it is not."""
        for task in self.tasks:
            if not claimed:
                task.next_ms = None
            elif run and task.next_ms is not None and now_ms >= task.next_ms:
                task.next_ms = now_ms + task.run(now_ms)
        if claimed and self.no_op.next_ms is None and self.config.max_idle_interval_ms > 0:
            self.no_op.next_ms = now_ms + self.config.max_idle_interval_ms

    def next_deadline_ms(self) -> int | None:
        """When the earliest task is due, None when none is scheduled."""
        due = [task.next_ms for task in self.tasks if task.next_ms is not None]
        return min(due) if due else None

    # ------------------------------------------------------------------ the tasks

    def _append_no_op(self, now_ms: int) -> int:
        self._write_no_op()
        return self.config.max_idle_interval_ms

    def run_writing(self, now_ms: int, find_records: FindRecords, interval_ms: int, message: str | None = None) -> int:
        """Run a task that writes, if the gate lets it (else again
        :data:`RETRY_AFTER_WRITE_MS` later): ``find_records`` gives the records to write and
        whether to run again at once (it wrote all it may at a time, or found something to
        do); else the task runs again ``interval_ms`` later. ``message`` (one ``%d``, the
        record count) is logged at INFO when it writes."""
        if not self._gate():
            return RETRY_AFTER_WRITE_MS
        records, again = find_records(self._context(now_ms))
        if records:
            if message is not None:
                self.log.info(message, len(records))
            self._write(records)
        return 0 if again else interval_ms

    def _expire_tokens(self, now_ms: int) -> int:
        return self.run_writing(
            now_ms, lambda ctx: ctx.controller.delegation_tokens.expired(now_ms),
            self.config.tokens.expiry_check_interval_ms, "removing %d expired delegation tokens",
        )

    def _fence_stale_broker(self, now_ms: int) -> int:
        """Fence one broker whose session expired, and look again at once after one was found;
        else look again after ``broker.session.timeout.ms`` / 8 (Kafka 4.x's period) or when the
        oldest session ends, whichever comes first (Kafka 3.x's ``rescheduleMaybeFenceStaleBrokers``
        timed its check so), so that a broker is fenced as its session ends, not up to an
        eighth of the timeout later."""

        def fence(ctx: OperationContext) -> tuple[list[Record], bool]:
            records = ctx.cluster.maybe_fence_stale_broker(
                now_ms, metadata_version=ctx.metadata_version, partitions=ctx.partition_effects
            )
            if records:
                broker = next((getattr(r, "broker_id", -1) for r, _ in records if hasattr(r, "broker_id")), -1)
                self.log.info("fencing broker %d because its session has timed out (%d records)", broker, len(records))
            return (records or [], records is not None)

        interval = max(1, self.config.session_timeout_ms // 8)
        expiry = self.controller.cluster.next_session_expiry_ms()
        if expiry is not None:  # used only when no session has expired: it then lies ahead
            interval = max(1, min(interval, expiry - now_ms))
        return self.run_writing(now_ms, fence, interval)

    def _balance_leaders(self, now_ms: int) -> int:
        """Give partitions back to their preferred replicas: a pass over the imbalanced
        partitions a slice at a time (``elections.BalanceWalk``), the next slice at once, the
        next pass after ``leader.imbalance.check.interval.seconds``."""

        def run(ctx: OperationContext) -> tuple[list[Record], bool]:
            walk = self.balance_walk
            if walk is None:
                walk = self.balance_walk = elections.BalanceWalk(elections.imbalanced_partitions(ctx.image))
            records = elections.balance_partition_leaders(
                **ctx.partition_context(), max_elections=MAX_ELECTIONS_PER_IMBALANCE, walk=walk)
            if walk.done:
                self.balance_walk = None
            return records, not walk.done

        return self.run_writing(
            now_ms, run, self.config.leader_imbalance_check_interval_ms,
            "moving leadership of %d partition(s) back to their preferred replicas",
        )

    def _elect_unclean_leaders(self, now_ms: int) -> int:
        """Elect leaders for leaderless partitions of topics with unclean.leader.election.enable,
        at most :data:`MAX_ELECTIONS_PER_IMBALANCE` at a time, and at once again when it wrote
        that many."""

        def run(ctx: OperationContext) -> tuple[list[Record], bool]:
            records = elections.elect_unclean_leaders(**ctx.partition_context(),
                                                      max_elections=MAX_ELECTIONS_PER_IMBALANCE)
            return records, len(records) >= MAX_ELECTIONS_PER_IMBALANCE

        return self.run_writing(
            now_ms, run, self.config.unclean_leader_election_interval_ms,
            "unclean leader election for %d leaderless partition(s)",
        )
