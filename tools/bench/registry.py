"""The benchmark sections ``python -m tools.bench`` knows, by name.

A section is a module with ``run(args) -> list[Result]`` (see :mod:`tools.bench.core`); adding one
is that module plus one line here. Modules are imported only when their section runs, so a
section whose dependencies are missing does not stop the others.
"""

from __future__ import annotations

SECTIONS: dict[str, str] = {
    "codec": "tools.bench.codec",  # generated codecs vs kafka-python 3.x's protocol classes
    "codec-floor": "tools.bench.codec_floor",  # generated codecs vs hand-inlined prototypes
    "storage": "tools.bench.storage",  # log append+fsync and recovery vs the disk and crc32c
    "audit": "tools.bench.audit",  # kraftlog scan on Spark local[2] vs one Python process
    "replicas": "tools.bench.replicas",  # brokers' replica audit, 1-50 GiB: Spark local and standalone vs one process
    "quorum": "tools.bench.quorum",  # 3-node TestRaftServer workload vs Kafka's TestRaftServer
    "failpoints": "tools.bench.failpoints",  # the commit path with failpoints compiled in and off vs without
    "brokers": "tools.bench.brokers",  # simulated brokers heartbeating: kwire vs Kafka's controller
    "topics": "tools.bench.topics",  # one admin client creating topics: kwire vs Kafka's controller
    "scale": "tools.bench.scale",  # the image at 10^4-10^6 partitions; stock metadata-shell loading its snapshot
}
