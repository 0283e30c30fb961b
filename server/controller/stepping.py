"""The one way the KRaft core and the controller host are stepped together: :func:`steps`
(core + host + events + now -> outboxes), used by the node's driver, the simulation and the
host's tests alike, so that all three see the production ordering. No I/O: the caller carries
out each outbox (the core's by ``server.raft.outbox.apply``, the host's replies, snapshot and
deadline) and says whether the core's flush completed at once.

The order of one turn (Kafka's ``KafkaRaftClient.poll`` beside ``QuorumController``'s event
queue):

1. the core takes ``events`` in one step (``RaftCore.step_many``), and its Outbox is carried
   out; while the caller's fsync completes at once, the core takes ``FlushCompleted`` in a
   step of its own, and that Outbox too;
2. the host is polled (``QuorumController.poll``): ``load`` lets it replay the next slice of an
   image being rebuilt, on the first poll only (a driver passes it on the turn of a due
   deadline, not behind each raft message), and its periodic tasks run on the first poll
   only (after its own appends they wait for the next turn, behind what came meanwhile);
3. the host's raft events step the core at once, consecutive ``ClientAppend``s in one step
   (one batch), anything else (a kraft.version upgrade) in a step of its own; then the host
   is polled again, until it hands over no raft event;
4. then, in one step, the appends ``held`` for the node's other writers (``Node.append``: the
   ``test-raft-server`` workload): after every append of the host's, because the host applies a
   write's records at the offsets it computed from the core as it stood when polled, and some
   records carry their own offset (a broker's epoch is the offset of its registration record,
   Kafka's ``OffsetControlManager.nextWriteOffset``); another writer's batch stepped first
   would move them, and the host would have to revert its image. The host is polled once more
   after that step (it may have news), until it hands over no raft event.

:func:`load_slice_records` sizes the host's slices of an image being rebuilt to
:data:`LOAD_SLICE_S` of the event loop, from how long the last one took.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence

from server.controller.host import ControllerOutbox, QuorumController
from server.raft.core import RaftCore
from server.raft.events import ClientAppend, Event, FlushCompleted, Outbox

__all__ = ["LOAD_SLICE_S", "MIN_LOAD_SLICE_RECORDS", "Stepping", "load_slice_records", "run_steps", "steps"]

LOAD_SLICE_S = 0.05
"""How long one slice of an image being rebuilt (a snapshot loaded, or the committed image
gone back to) should hold the event loop. The node sizes the host's slices
(``QuorumController.load_records_per_poll``) to it from the time the last slice's step took,
between :data:`MIN_LOAD_SLICE_RECORDS` and the host's default. At a million partitions that
default, 20,000 records, holds the loop 0.4 s on an idle core and over a second on a busy
machine: a loading leader then answers no Fetch, and a loading follower sends none, for that
long, and a few such pauses in a row cost the quorum its leader."""

MIN_LOAD_SLICE_RECORDS = 500

Stepping = Generator[Outbox | ControllerOutbox, bool | None, None]
"""What :func:`steps` returns: it yields each outbox to carry out, in order, and takes (by
``send``) after a core Outbox whether its flush completed at once (True: the core steps with
``FlushCompleted`` next), after a host outbox None."""


def load_slice_records(records: int, took_s: float, most: int) -> int:
    """The records of an image's next slice, given that the last one of ``records`` took
    ``took_s`` seconds: what takes :data:`LOAD_SLICE_S` at that pace, between
    :data:`MIN_LOAD_SLICE_RECORDS` (or ``most``, if less) and ``most``."""
    if took_s <= 0:
        return records
    return max(min(MIN_LOAD_SLICE_RECORDS, most), min(most, int(records * LOAD_SLICE_S / took_s)))


def steps(
    core: RaftCore, host: QuorumController, events: Sequence[Event], now_ms: Callable[[], int], *, load: bool = False,
    on_step: Callable[[Sequence[Event]], None] | None = None, held: Sequence[ClientAppend] = (),
) -> Stepping:
    """One turn of ``core`` and ``host`` (module docstring): ``events`` (none: only the host
    has news) in one step, then the host polled and its appends stepped until neither has
    anything left to do now, then ``held`` (other writers' appends) in one step after all of
    the host's; ``now_ms()`` is read at each step and poll. ``on_step`` is told the events of
    each core step before it is taken (a trace's)."""
    queue: deque[list[Event]] = deque([list(events)] if events else [])
    others: list[Event] = list(held)
    run_tasks = True
    while True:
        while queue:
            stepped: Sequence[Event] = queue.popleft()
            while True:
                if on_step is not None:
                    on_step(stepped)
                if not (yield core.step_many(now_ms(), stepped)):
                    break
                stepped = (FlushCompleted(),)
        host_out = host.poll(now_ms(), run_tasks=run_tasks, load=load)
        run_tasks = load = False
        yield host_out
        if not host_out.raft_events:
            if not others:
                return
            queue.append(others)  # one step, after every append of the host's
            others = []
            continue
        for event in host_out.raft_events:
            if isinstance(event, ClientAppend) and queue and isinstance(queue[-1][-1], ClientAppend):
                queue[-1].append(event)
            else:
                queue.append([event])


def run_steps(
    stepping: Stepping, apply: Callable[[Outbox], bool], carry_out: Callable[[ControllerOutbox], None],
) -> None:
    """Carry out every outbox of ``stepping`` at once: ``apply`` a core Outbox (returning
    whether its flush completed), ``carry_out`` a host outbox. A driver that awaits its I/O
    sends to the generator itself."""
    sent: bool | None = None
    while True:
        try:
            out = stepping.send(sent)
        except StopIteration:
            return
        if isinstance(out, ControllerOutbox):
            carry_out(out)
            sent = None
        else:
            sent = apply(out)
