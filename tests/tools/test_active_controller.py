"""tools.quorum_client.active_controller asks again, as Kafka's admin client does, while the
answer is retriable: no active controller listed yet, or NOT_CONTROLLER (a read that waited for
its commit on a node that lost the leadership meanwhile); another error is final."""

from __future__ import annotations

import trio

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from messages.protocol import Request
from messages.runtime import Message
from server.config import Listener
from server.net import HandlerTable, RequestContext, RunningServer, serve
from tools.quorum_client import QuorumToolError, active_controller

CONTROLLER_ENDPOINT_TYPE = 2


def _run(answers: list[DescribeClusterResponse]) -> tuple[object, int]:
    """Serve DescribeCluster with ``answers`` in turn (the last one again after); ask
    active_controller: its result (or the exception it raised) and how often it asked."""
    asked = 0

    async def describe_cluster(request: Request, ctx: RequestContext) -> Message:
        nonlocal asked
        asked += 1
        return answers[min(asked, len(answers)) - 1]

    async def main() -> object:
        table = HandlerTable()
        table.register(ApiKey.DESCRIBE_CLUSTER, (0, 2), describe_cluster)
        async with trio.open_nursery() as nursery:
            running: RunningServer = await nursery.start(
                lambda task_status: serve([Listener("C", "127.0.0.1", 0)], table, task_status=task_status))
            try:
                with trio.fail_after(10):
                    result: object = await active_controller(f"127.0.0.1:{running.port()}")
            except QuorumToolError as exc:
                result = exc
            nursery.cancel_scope.cancel()
        return result

    return trio.run(main), asked


def _answer(error: int = Errors.NONE, controller_id: int = 1) -> DescribeClusterResponse:
    return DescribeClusterResponse(
        error_code=error, endpoint_type=CONTROLLER_ENDPOINT_TYPE, cluster_id="c1", controller_id=controller_id,
        brokers=[DescribeClusterBroker(broker_id=1, host="127.0.0.1", port=9093)] if error == Errors.NONE else [],
    )


def test_not_controller_is_asked_again_until_a_controller_is_listed() -> None:
    result, asked = _run([_answer(Errors.NOT_CONTROLLER), _answer(controller_id=-1), _answer()])
    assert result == ("c1", "127.0.0.1", 9093)
    assert asked == 3


def test_another_error_is_final() -> None:
    result, asked = _run([_answer(Errors.CLUSTER_AUTHORIZATION_FAILED), _answer()])
    assert isinstance(result, QuorumToolError)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(result)
    assert asked == 1
