"""How long the active controller's requests wait and run: the two timers of Kafka's
``ControllerEventManager`` group (``QuorumControllerMetrics``), kept as plain numbers.

``EventQueueTimeMs`` is the time from a controller request's arrival (its frame decoded) to
the start of its handling, parked time included (a request waits while an earlier write is
uncommitted); ``EventQueueProcessingTimeMs`` the time its handling takes, up to its records
being handed to the log (the commit is not counted, as in Kafka, whose answer also waits for
it outside the event). Each keeps a count, a sum and the last :data:`RESERVOIR` samples, from
which :meth:`EventTimes.summary` gives quantiles (Kafka's Yammer histograms also sample).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["RESERVOIR", "EventTimes", "EventTimesSummary"]

RESERVOIR = 1024
"""Samples kept for the quantiles."""


@dataclass(frozen=True, slots=True)
class EventTimesSummary:
    """``count`` samples summing to ``sum_ms``; quantile -> ms over the recent samples."""

    count: int
    sum_ms: float
    quantiles: dict[float, float]


class EventTimes:
    """One timer's samples, in ms."""

    QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999)
    """The percentiles Kafka's histograms report (50th, 75th, 95th, 99th, 999th)."""

    def __init__(self) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self._recent: deque[float] = deque(maxlen=RESERVOIR)

    def record(self, ms: float) -> None:
        """Add one sample of ``ms`` milliseconds (negative ones count as 0)."""
        ms = max(0.0, ms)
        self.count += 1
        self.sum_ms += ms
        self._recent.append(ms)

    def summary(self) -> EventTimesSummary:
        """The count, the sum and the quantiles of the recent samples (none before any)."""
        ordered = sorted(self._recent)
        quantiles = {}
        if ordered:
            for q in self.QUANTILES:
                quantiles[q] = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
        return EventTimesSummary(self.count, self.sum_ms, quantiles)
