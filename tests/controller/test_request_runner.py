"""Running controller requests (``server.controller.request_runner``): reads, writes, their
answers after the writes before them, and what meets a request on arrival. The operations are
the tests' own registry entries; the offsets ledger, write queue and outbox writer are real."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from kwire.errors import Errors
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.unregister_controller_response import UnregisterControllerResponse
from messages.metadata import encode_record
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.offset_control import OffsetControl
from server.controller.operation_context import ControllerConfig, OperationContext
from server.controller.outbox import OutboxWriter, RaftView
from server.controller.registry import ControllerApi
from server.controller.request_runner import ControllerRequest, RequestRunner, RunnerHost
from server.controller.responses import not_controller
from server.controller.result import ControllerResult
from server.controller.write_queue import DeferredWriteQueue
from server.raft.events import ClientAppend, UpgradeKRaftVersion
from server.raft.types import LeaderAndEpoch, VoterSet

FENCE = (FenceBrokerRecord(id=1, epoch=2), 0)


def _respond(request: Any, version: int, outcome: Any) -> UnregisterControllerResponse:
    """The outcome as an answer: an error's code and message, or the result's text."""
    if isinstance(outcome, ApiError):
        return UnregisterControllerResponse(error_code=int(outcome.error), error_message=outcome.message)
    return UnregisterControllerResponse(error_code=0, error_message=str(outcome))


class _Silent:
    def info(self, msg: str, *args: Any) -> None:
        pass

    def error(self, msg: str, *args: Any) -> None:
        pass


@dataclass
class _Admission:
    refuse: ApiError | None = None
    refused: list[Any] = field(default_factory=list)

    def refusal(self, request: ControllerRequest, api: ControllerApi) -> ApiError | None:
        self.refused.append(request.handle)
        return self.refuse

    def resource_authorizer(self, request: ControllerRequest) -> None:
        return None


@dataclass
class _Seat:
    controller: ControlManagers
    active: bool = True

    def active_controller(self) -> ControlManagers | None:
        return self.controller if self.active else None

    def not_controller(self) -> ApiError:
        return not_controller(2)


class Fixture:
    def __init__(self) -> None:
        self.raft = SimpleNamespace(epoch=5, leader_and_epoch=LeaderAndEpoch(1, 5), next_append_offset=40,
                                    voters=VoterSet.static({1: ("host1", 9001)}))
        self.admission = _Admission()
        self.host = SimpleNamespace(
            config=ControllerConfig(node_id=1, cluster_id="runner-test", static_config={}), raft=self.raft,
            controller=ControlManagers(bootstrap=()), rng=random.Random(3), log=_Silent(), admission=self.admission,
            replayed_offset=40,
        )
        self.seat = _Seat(self.host.controller)
        self.offsets = OffsetControl()
        self.queue: DeferredWriteQueue[ControllerRequest] = DeferredWriteQueue()
        self.replayed: list[tuple[bytes | None, int, str]] = []
        self.writer = OutboxWriter(cast(RaftView, self.raft), self.offsets, self.queue,
                                   lambda value, offset, how: self.replayed.append((value, offset, how)))
        self.clock: Iterator[float] = iter([1.0, 1.25, 2.0, 2.5, 3.0, 3.5])
        self.runner = RequestRunner(cast(RunnerHost, self.host), self.seat, self.offsets, self.queue, self.writer,
                                    perf_counter=lambda: next(self.clock))
        self.ran: list[OperationContext] = []
        self.arrivals: list[int] = []

    def api(self, result: ControllerResult | ApiError, *, write: bool = True) -> ControllerApi:
        def operation(ctx: OperationContext, body: Any, version: int) -> ControllerResult:
            self.ran.append(ctx)
            if isinstance(result, ApiError):
                raise result
            return result

        return ControllerApi(UnregisterControllerRequest if write else DescribeClusterRequest, operation, _respond,
                             write=write, on_arrival=lambda controller, body, now_ms: self.arrivals.append(now_ms))

    def answers(self) -> list[tuple[Any, int, str | None]]:
        return [(handle, reply.error_code, reply.error_message) for handle, reply in self.writer.out.replies]


def _request(handle: str, received_ms: int = 0, **fields: Any) -> ControllerRequest:
    return ControllerRequest(handle, UnregisterControllerRequest(controller_id=1), 0, received_ms=received_ms, **fields)


def test_a_write_is_applied_ahead_and_answered_when_its_batch_commits() -> None:
    fixture = Fixture()
    fixture.runner.arrived(100, _request("w", received_ms=70), fixture.api(ControllerResult([FENCE], "done")))
    assert fixture.replayed == [(encode_record(*FENCE), 40, "appended")]
    assert fixture.arrivals == [100]
    assert fixture.answers() == [], "it waits for its commit"
    fixture.queue.landed(-1, 40)
    fixture.queue.complete_up_to(40)
    assert fixture.answers() == [("w", 0, "done")]
    assert fixture.runner.queue_times.sum_ms == 30
    assert fixture.runner.processing_times.sum_ms == 250, "perf_counter 1.0 to 1.25 s"


def test_a_write_off_the_active_controller_or_refused_by_its_operation_appends_nothing() -> None:
    fixture = Fixture()
    fixture.seat.active = False
    fixture.runner.run(0, _request("off"), fixture.api(ControllerResult([FENCE], "done")))
    fixture.seat.active = True
    refused = ApiError(Errors.INVALID_REQUEST, "no")
    fixture.runner.run(0, _request("bad"), fixture.api(refused))
    assert fixture.answers() == [("off", int(Errors.NOT_CONTROLLER), "The active controller appears to be node 2."),
                                 ("bad", int(Errors.INVALID_REQUEST), "no")]
    assert len(fixture.ran) == 1, "the operation does not run off the active controller"
    assert fixture.writer.out.raft_events == [] and not fixture.queue.pending


def test_a_kraft_upgrade_goes_first_its_records_wait_for_their_commit_and_the_barrier_rises() -> None:
    fixture = Fixture()
    fixture.runner.run(0, _request("up"), fixture.api(ControllerResult([FENCE], "done", kraft_upgrade=1)))
    events = fixture.writer.out.raft_events
    assert isinstance(events[0], UpgradeKRaftVersion) and events[0].level == 1
    assert isinstance(events[1], ClientAppend)
    assert fixture.replayed == [] and not fixture.offsets.speculating
    assert fixture.queue.barrier and fixture.queue.blocked


def test_a_write_that_wrote_nothing_is_answered_after_the_writes_before_it() -> None:
    fixture = Fixture()
    fixture.runner.run(0, _request("first"), fixture.api(ControllerResult([FENCE, FENCE], "written")))
    fixture.runner.run(0, _request("second"), fixture.api(ControllerResult((), "nothing to write")))
    assert fixture.answers() == []
    fixture.queue.landed(-1, 41)
    fixture.queue.complete_up_to(41)
    assert fixture.answers() == [("first", 0, "written"), ("second", 0, "nothing to write")]


def test_a_read_waits_for_what_it_saw_on_the_active_controller_only() -> None:
    fixture = Fixture()
    fixture.runner.run(0, _request("w"), fixture.api(ControllerResult([FENCE], "done")))
    read = fixture.api(ControllerResult((), "image"), write=False)
    fixture.runner.arrived(0, _request("read"), read)
    assert fixture.answers() == []
    fixture.seat.active = False
    fixture.runner.arrived(0, _request("elsewhere"), read)
    assert fixture.answers() == [("elsewhere", 0, "image")]
    assert fixture.arrivals == [], "on_arrival is for writes"
    fixture.queue.fail_all(not_controller(2))  # the leadership lost before the commit
    assert fixture.answers()[1:] == [("w", int(Errors.NOT_CONTROLLER), "The active controller appears to be node 2."),
                                     ("read", int(Errors.NOT_CONTROLLER), "The active controller appears to be node 2.")]


def test_a_read_whose_operation_refuses_answers_the_error() -> None:
    fixture = Fixture()
    fixture.runner.arrived(0, _request("r"), fixture.api(ApiError(Errors.UNKNOWN_SERVER_ERROR, "not ready"), write=False))
    assert fixture.answers() == [("r", int(Errors.UNKNOWN_SERVER_ERROR), "not ready")]


def test_admission_refuses_before_the_operation_runs() -> None:
    fixture = Fixture()
    fixture.admission.refuse = ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED, "denied")
    fixture.runner.arrived(0, _request("x"), fixture.api(ControllerResult([FENCE], "done")))
    assert fixture.answers() == [("x", int(Errors.CLUSTER_AUTHORIZATION_FAILED), "denied")]
    assert fixture.ran == [] and fixture.arrivals == [] and fixture.writer.out.raft_events == []


def test_a_write_arriving_behind_waiting_requests_waits_on_the_active_controller_only() -> None:
    fixture = Fixture()
    fixture.queue.waiting.append(_request("earlier"))
    api = fixture.api(ControllerResult([FENCE], "done"))
    fixture.runner.arrived(5, _request("later"), api)
    assert [r.handle for r in fixture.queue.waiting] == ["earlier", "later"]
    assert fixture.arrivals == [5] and fixture.ran == []
    fixture.seat.active = False
    fixture.runner.arrived(6, _request("off"), api)
    assert fixture.answers() == [("off", int(Errors.NOT_CONTROLLER), "The active controller appears to be node 2.")]


def test_a_periodic_tasks_context_has_no_principal_of_a_request() -> None:
    fixture = Fixture()
    fixture.runner.run(0, _request("w"), fixture.api(ControllerResult([FENCE], "done")))
    context = fixture.runner.context(9)
    assert (context.now_ms, context.leader_id, context.voter_ids, context.pending_records) == (9, 1, frozenset({1}), 1)
    assert context.authorize is None and not context.token_requests_allowed
    assert context.principal == "User:ANONYMOUS" and context.listener_name == ""
    request = fixture.runner.context(9, _request("r", listener_name="CONTROLLER", principal="User:alice"))
    assert (request.listener_name, request.principal, request.token_requests_allowed) == ("CONTROLLER", "User:alice", True)
