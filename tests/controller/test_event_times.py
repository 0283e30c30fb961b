"""The two timers of the controller's event queue (``server.controller.event_times``, Kafka's
``EventQueueTimeMs`` and ``EventQueueProcessingTimeMs`` histograms)."""

from __future__ import annotations

from server.controller.event_times import RESERVOIR, EventTimes, EventTimesSummary


def test_no_samples_no_quantiles() -> None:
    assert EventTimes().summary() == EventTimesSummary(count=0, sum_ms=0.0, quantiles={})


def test_count_and_sum_cover_every_sample() -> None:
    times = EventTimes()
    for ms in (1.5, 2.5, 6.0):
        times.record(ms)
    summary = times.summary()
    assert (summary.count, summary.sum_ms) == (3, 10.0)


def test_negative_samples_count_as_zero() -> None:
    times = EventTimes()
    times.record(-5.0)
    times.record(3.0)
    summary = times.summary()
    assert (summary.count, summary.sum_ms) == (2, 3.0)
    assert summary.quantiles[0.5] == 3.0 and min(summary.quantiles.values()) == 3.0
    times.record(-1.0)
    assert times.summary().quantiles[0.5] == 0.0


def test_the_quantiles_are_kafka_s_percentiles() -> None:
    times = EventTimes()
    times.record(1.0)
    assert tuple(times.summary().quantiles) == (0.5, 0.75, 0.95, 0.99, 0.999)
    assert set(times.summary().quantiles.values()) == {1.0}


def test_quantiles_of_a_hundred_samples() -> None:
    times = EventTimes()
    for ms in reversed(range(100)):  # the order of arrival does not matter
        times.record(float(ms))
    assert times.summary().quantiles == {0.5: 50.0, 0.75: 75.0, 0.95: 95.0, 0.99: 99.0, 0.999: 99.0}


def test_quantiles_of_a_few_samples_never_pass_the_largest() -> None:
    times = EventTimes()
    for ms in (10.0, 20.0, 30.0):
        times.record(ms)
    assert times.summary().quantiles == {0.5: 20.0, 0.75: 30.0, 0.95: 30.0, 0.99: 30.0, 0.999: 30.0}


def test_the_quantiles_use_only_the_latest_samples() -> None:
    times = EventTimes()
    for _ in range(RESERVOIR):
        times.record(1000.0)
    for _ in range(RESERVOIR):
        times.record(1.0)
    summary = times.summary()
    assert summary.count == 2 * RESERVOIR and summary.sum_ms == RESERVOIR * 1001.0
    assert set(summary.quantiles.values()) == {1.0}


def test_the_reservoir_holds_1024_samples() -> None:
    assert RESERVOIR == 1024
    times = EventTimes()
    for ms in range(RESERVOIR + 1):  # sample 0 falls out
        times.record(float(ms))
    summary = times.summary()
    assert summary.count == RESERVOIR + 1 and summary.quantiles[0.5] == RESERVOIR // 2 + 1
