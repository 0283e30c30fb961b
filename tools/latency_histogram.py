"""A histogram of whole-millisecond latencies with nearest-rank percentiles.

:class:`LatencyHistogram` keeps a count per millisecond, so ``kwire test-raft-server``
(:mod:`tools.raft_server_load`) can time hundreds of thousands of records a second and report
the p50/p75/p99/p999/max that Kafka's ``TestRaftServer`` prints, exactly as sorting them would.
"""

from __future__ import annotations

import math

__all__ = ["LatencyHistogram"]


_QUANTILES = (("p50", 0.5), ("p75", 0.75), ("p99", 0.99), ("p999", 0.999))
_NO_PERCENTILES = {"p50": 0.0, "p75": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}


def _nearest_rank(q: float, n: int) -> int:
    """The 0-based index of quantile ``q``'s nearest rank among ``n`` sorted values."""
    return min(n - 1, max(0, int(q * n + 0.999999) - 1))


class LatencyHistogram:
    """Whole-millisecond latencies as a count per millisecond (index: latency in ms).

    :meth:`add_run` records an append's records -- due ``step_ms`` apart and committed at one
    instant, so their latencies fall by ``step_ms`` from record to record -- with one step per
    distinct millisecond among them rather than one per record: at 160,000 records/s an append
    of 30 records spans under a fifth of a millisecond. :meth:`percentiles` gives the nearest-rank
    percentiles of the recorded latencies, exactly as sorting them one by one would.
    """

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.total = 0

    def __len__(self) -> int:
        return self.total

    def add(self, latency_ms: int, count: int = 1) -> None:
        """``count`` records of ``latency_ms`` (>= 0) each."""
        counts = self.counts
        if latency_ms >= len(counts):
            counts.extend([0] * (latency_ms + 1 - len(counts)))
        counts[latency_ms] += count
        self.total += count

    def add_run(self, late_ms: float, count: int, step_ms: float) -> None:
        """``count`` records, the k-th of latency ``max(0, int(late_ms - k * step_ms))`` ms
        (``step_ms`` > 0): the first is ``late_ms`` late, each next one was due ``step_ms``
        later. The bounds between milliseconds are found with that same expression, so each
        record lands where computing its latency alone would put it."""
        k = 0
        while k < count:
            value = int(late_ms - k * step_ms)
            if value <= 0:  # this one and every later one: due at or after the commit
                self.add(0, count - k)
                return
            # the first record after k of a lower latency: late_ms - j * step_ms < value
            end = min(count, max(k + 1, math.ceil((late_ms - value) / step_ms)))
            while end > k + 1 and int(late_ms - (end - 1) * step_ms) < value:
                end -= 1
            while end < count and int(late_ms - end * step_ms) >= value:
                end += 1
            self.add(value, end - k)
            k = end

    def merge(self, other: LatencyHistogram) -> None:
        """Add every record of ``other``."""
        for latency_ms, count in enumerate(other.counts):
            if count:
                self.add(latency_ms, count)

    def percentiles(self) -> dict[str, float]:
        """p50/p75/p99/p999/max (nearest rank) of every recorded latency, in ms; zeros when
        empty."""
        n = self.total
        if n == 0:
            return _NO_PERCENTILES.copy()
        wanted = sorted((_nearest_rank(q, n), name) for name, q in _QUANTILES)
        result: dict[str, float] = {}
        seen = 0
        for latency_ms, count in enumerate(self.counts):
            seen += count
            while wanted and wanted[0][0] < seen:
                result[wanted.pop(0)[1]] = float(latency_ms)
            if count:
                result["max"] = float(latency_ms)
        return {name: result[name] for name, _q in _QUANTILES} | {"max": result["max"]}
