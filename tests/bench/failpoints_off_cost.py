"""What the failpoints cost while none is armed, on the controller's request and commit path.

    PYTHONPATH=$PWD .venv/bin/python -m tests.bench.failpoints_off_cost

Runs BrokerHeartbeats and CreateTopics (one topic each: a write appended, committed and
answered) through a single-voter core and its controller host (the sans-IO pair the node
drives, as ``tests/controller/test_host.py``), and times the one check the host makes per
request while nothing is armed (``host.failpoints.armed``) and ``Failpoints.hit`` on an unarmed
registry, against a bare function call. Best of five runs each.
"""

from __future__ import annotations

import random
import time
import timeit
from collections.abc import Callable

from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from server.failpoints import Failpoints
from tests.controller.test_host import _active, _heartbeat, _registration


def _per_call_s(run: Callable[[], None], n: int) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            run()
        best = min(best, (time.perf_counter() - started) / n)
    return best


def main() -> None:
    harness = _active()
    registered = object()
    harness.request(_registration(5), 4, registered)
    epoch = harness.answer(registered).broker_epoch  # type: ignore[union-attr]
    assert not harness.host.failpoints.armed
    names = iter(range(10**9))

    def heartbeat() -> None:
        harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, object())

    def create_topic() -> None:
        topic = CreatableTopic(name=f"t{next(names)}", num_partitions=1, replication_factor=1)
        harness.request(CreateTopicsRequest(topics=[topic], timeout_ms=1000), 7, object())

    beat_s = _per_call_s(heartbeat, 2000)
    write_s = _per_call_s(create_topic, 500)
    assert harness.replies[-1][1].topics[0].error_code == 0, harness.replies[-1]  # type: ignore[attr-defined]
    n = 2_000_000
    env = {"host": harness.host, "fp": Failpoints(random.Random(1).random), "bare": lambda: None}
    guard_s = min(timeit.repeat("host.failpoints.armed", globals=env, number=n, repeat=5)) / n
    hit_s = min(timeit.repeat("fp.hit('controller.heartbeat')", globals=env, number=n, repeat=5)) / n
    bare_s = min(timeit.repeat("bare()", globals=env, number=n, repeat=5)) / n
    print(f"bare function call:                 {bare_s * 1e9:7.1f} ns")
    print(f"Failpoints.hit, nothing armed:      {hit_s * 1e9:7.1f} ns")
    print(f"host guard (host.failpoints.armed): {guard_s * 1e9:7.1f} ns")
    print(f"BrokerHeartbeat through host+core:  {beat_s * 1e6:7.1f} us  (guard = {guard_s / beat_s:.3%})")
    print(f"CreateTopics append+commit+answer:  {write_s * 1e6:7.1f} us  (guard = {guard_s / write_s:.3%})")


if __name__ == "__main__":
    main()
