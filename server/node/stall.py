"""Reporting an event loop that stopped turning.

A KRaft peer is judged by its timing: a leader that answers no Fetch for
``controller.quorum.fetch.timeout.ms`` (2 s by default) loses its followers to an election,
and one that hears from no majority for 1.5 times that resigns (KIP-595's check quorum). A node
runs on one Trio event loop, one task at a time. A step that keeps that thread -- a long
computation, a call that blocks, a full garbage collection -- stops every other task. Nothing
inside the loop can see such a pause while it lasts, and afterwards only its effect shows: an
election, a resignation.

:class:`StallWatch` watches from outside the loop. A Trio task marks the time every
``interval_s``. A daemon thread looks at the mark as often; once it is older than
``threshold_s``, the thread logs a WARN on ``kwire.node`` with the loop thread's Python stack
as it stands then (``sys._current_frames``, what ``faulthandler`` prints). When the loop turns
again, it logs how long the pause was. The watching thread needs the GIL for its look, which
CPython hands over every ``sys.getswitchinterval()`` (5 ms) while the loop runs Python code;
during one long call into C code that keeps the GIL, the look waits for the call to end, and
the stack is then the one after it. A garbage collection is such a call: the watch times each
collection on the loop's thread (``gc.callbacks``), and a report names the collections that
took a quarter of the threshold or more since the loop last ran, with their generation and
time. The cost on the loop is one wake per interval, and a call of a short Python function at
each collection's start and end.

The node starts one with half its fetch timeout as the threshold: a pause that long is already
half an election.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable

import trio

__all__ = ["StallWatch"]

STACK_FRAMES = 24
"""The innermost frames of the loop's stack a report shows."""


class StallWatch:
    """Watches the Trio event loop that runs :meth:`run` for pauses longer than
    ``threshold_s`` seconds (module docstring); ``interval_s`` (default a tenth of the
    threshold) is how often the loop marks the time and the thread looks. ``log`` receives
    the reports (WARNING); ``clock`` is a monotonic clock in seconds."""

    def __init__(self, threshold_s: float, *, log: logging.Logger, interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if threshold_s <= 0:
            raise ValueError(f"the stall threshold must be positive, not {threshold_s}")
        self.threshold_s = threshold_s
        self.interval_s = interval_s if interval_s is not None else threshold_s / 10
        self.log = log
        self._clock = clock
        self._mark = clock()
        self._loop_thread: int | None = None
        self.stalls = 0
        """Pauses reported so far."""
        self._collection_started = 0.0
        self._long_collections: deque[tuple[float, int, float]] = deque(maxlen=16)
        """The latest long collections on the loop's thread: (end, generation, seconds)."""

    async def run(self) -> None:
        """Mark the time every interval and keep the watching thread going; runs until
        cancelled, and the thread ends within an interval after."""
        self._loop_thread = threading.get_ident()
        stopped = threading.Event()
        threading.Thread(target=self._watch, args=(stopped,), name="kwire-stall-watch", daemon=True).start()
        gc.callbacks.append(self._on_collection)
        try:
            while True:
                self._mark = self._clock()
                await trio.sleep(self.interval_s)
        finally:
            gc.callbacks.remove(self._on_collection)
            stopped.set()

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._loop_thread:
            return
        now = self._clock()
        if phase == "start":
            self._collection_started = now
        elif now - self._collection_started >= self.threshold_s / 4:
            self._long_collections.append((now, info["generation"], now - self._collection_started))

    def _collections_since(self, mark: float) -> str:
        """The long collections that ended after ``mark``, as a clause of a report."""
        found = [(generation, took) for end, generation, took in list(self._long_collections) if end > mark]
        if not found:
            return ""
        return " (" + ", ".join(f"a garbage collection of generation {g} took {t * 1000:.0f} ms" for g, t in found) + ")"

    def _watch(self, stopped: threading.Event) -> None:
        reported: float | None = None  # the mark of the pause last reported
        while not stopped.wait(self.interval_s):
            mark = self._mark
            if reported is not None and mark != reported:
                self.log.warning("the event loop ran again after %d ms%s", (mark - reported) * 1000,
                                 self._collections_since(reported))
                reported = None
            late = self._clock() - mark
            if late > self.threshold_s and reported is None:
                reported = mark
                self.stalls += 1
                self.log.warning("the event loop has not run for %d ms%s; it is at:\n%s", late * 1000,
                                 self._collections_since(mark), self._stack())

    def _stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread or 0)
        if frame is None:
            return "  (no stack: the loop's thread is gone)\n"
        return "".join(traceback.format_stack(frame, limit=STACK_FRAMES))
