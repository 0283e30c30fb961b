"""``server.node.fairness.forward_requests``: the requests a storm of connections sent reach the
driving task in one turn of Trio's loop, in the order they were sent, not one per turn.

A thousand simulated brokers each waiting on the node's unbuffered request channel were taken
one per turn: a follower's Fetch sent behind them waited a thousand turns, for seconds on a
loaded machine, and the followers elected another leader in the middle of the storm."""

from __future__ import annotations

import trio
import trio.testing

from server.node.fairness import forward_requests

CONNECTIONS = 200


def _turns_to_forward(connections: int) -> tuple[int, list[int], list[int]]:
    """Start ``connections`` tasks that each send their number on an unbuffered channel, let
    them all wait, then start the forwarder: the turns of the loop until every number was
    posted (counted by a task that checkpoints once per turn), the numbers in the order they
    were sent and as posted."""
    sent: list[int] = []
    posted: list[int] = []
    turns = 0

    async def connection(send: trio.MemorySendChannel[int], i: int) -> None:
        sent.append(i)  # send() waits without a turn in between: this is the order of sending
        await send.send(i)

    async def main() -> None:
        nonlocal turns
        send, receive = trio.open_memory_channel[int](0)
        async with trio.open_nursery() as nursery:
            for i in range(connections):
                nursery.start_soon(connection, send, i)
            await trio.testing.wait_all_tasks_blocked()  # every connection waits in send
            nursery.start_soon(forward_requests, receive, posted.append)
            with trio.fail_after(10):
                while len(posted) < connections:
                    turns += 1
                    await trio.lowlevel.checkpoint()  # one turn of the loop
            await send.aclose()

    trio.run(main)
    return turns, sent, posted


def test_every_waiting_request_is_forwarded_within_a_turn_or_two_in_order() -> None:
    turns, sent, posted = _turns_to_forward(CONNECTIONS)
    assert sorted(sent) == list(range(CONNECTIONS))
    assert posted == sent
    assert turns <= 3, f"{turns} turns of the loop to forward {CONNECTIONS} waiting requests"


def test_forwarding_ends_when_the_channel_closes() -> None:
    async def main() -> list[int]:
        posted: list[int] = []
        send, receive = trio.open_memory_channel[int](0)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(forward_requests, receive, posted.append)
                async with send:
                    await send.send(1)
                    await send.send(2)
        return posted  # the nursery ended: the forwarder returned once the channel closed

    assert trio.run(main) == [1, 2]


def test_a_channel_closed_while_waiting_requests_are_taken_ends_the_forwarding() -> None:
    """The sender closes right after its last request was taken by ``receive`` and before the
    forwarder looks for more with ``receive_nowait``: the forwarder returns, it does not raise
    EndOfChannel into the node's nursery."""

    class ClosingAfterReceive:
        def __init__(self, receive: trio.MemoryReceiveChannel[int], send: trio.MemorySendChannel[int]) -> None:
            self.inner, self.send = receive, send

        def __aiter__(self) -> ClosingAfterReceive:
            return self

        async def __anext__(self) -> int:
            try:
                item = await self.inner.receive()
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
            self.send.close()  # the last sender goes away at once
            return item

        def receive_nowait(self) -> int:
            return self.inner.receive_nowait()

    async def main() -> list[int]:
        posted: list[int] = []
        send, receive = trio.open_memory_channel[int](1)
        await send.send(7)
        with trio.fail_after(10):
            await forward_requests(ClosingAfterReceive(receive, send), posted.append)  # type: ignore[arg-type]
        return posted

    assert trio.run(main) == [7]
