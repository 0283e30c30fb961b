"""The Python twins of the Java policies in compat/oracle/src/kwire/policy/, for the differential
policy test (compat/test_policies.py): the same rules, refusing with the same words, Java's
``Map.toString`` of a ``TreeMap`` included, so that both answer alike only when both were
shown the same request. Like any kwire plug-in they need not import kwire: a refusal is an
exception class named ``PolicyViolationException``.

    create.topic.policy.class.name=compat.example_policies:MinPartitionsPolicy
    alter.config.policy.class.name=compat.example_policies:NoCompactionPolicy
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


class PolicyViolationException(Exception):  # noqa: N818 - the name kwire recognizes
    """A refusal."""


def java(value: Any) -> str:
    """``String.valueOf`` of a request field: null, a sorted map as ``{k=v, ...}``, a list of
    ints as ``[1, 2]``."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={java(value[k])}" for k in sorted(value)) + "}"
    return str(value)


class MinPartitionsPolicy:
    """A topic needs at least ``policy.min.partitions`` partitions (default 1); a topic named
    "crash" makes it throw."""

    def __init__(self) -> None:
        self.min = 1

    def configure(self, configs: Mapping[str, str]) -> None:
        if "policy.min.partitions" in configs:
            self.min = int(configs["policy.min.partitions"])

    def validate(self, request: Any) -> None:
        if request.topic == "crash":
            raise RuntimeError(f"this policy cannot judge {request.topic}")
        count = request.num_partitions if request.num_partitions is not None else len(request.replicas_assignments)
        if count < self.min:
            raise PolicyViolationException(
                f"Topic {request.topic} refused: numPartitions={java(request.num_partitions)}, "
                f"replicationFactor={java(request.replication_factor)}, "
                f"replicasAssignments={java(request.replicas_assignments)}, configs={java(request.configs)}; "
                f"at least {self.min} partitions required."
            )

    def close(self) -> None:
        pass


class NoCompactionPolicy:
    """No topic may be compacted; a broker setting message.max.bytes, or a topic setting
    max.message.bytes, to 0 breaks it."""

    def configure(self, configs: Mapping[str, str]) -> None:
        pass

    def validate(self, request: Any) -> None:
        configs, resource = request.configs, request.resource
        if resource.type == "TOPIC" and "compact" in (configs.get("cleanup.policy") or ""):
            raise PolicyViolationException(f"No compaction: {resource.type} {resource.name} {java(configs)}")
        if resource.type == "BROKER" and configs.get("message.max.bytes") == "0":
            raise RuntimeError("message.max.bytes=0 breaks this policy")
        if resource.type == "TOPIC" and configs.get("max.message.bytes") == "0":
            raise RuntimeError("max.message.bytes=0 breaks this policy")

    def close(self) -> None:
        pass


class StallingMinPartitionsPolicy(MinPartitionsPolicy):
    """:class:`MinPartitionsPolicy`, except that it holds a call for a topic named "stall"
    ``policy.stall.ms`` (default 1000) before it accepts it: a policy slower than
    ``kwire.plugin.timeout.ms``, for compat/test_dev_cluster_brokers.py (it has no Java twin)."""

    def __init__(self) -> None:
        super().__init__()
        self.stall_s = 1.0

    def configure(self, configs: Mapping[str, str]) -> None:
        super().configure(configs)
        self.stall_s = int(configs.get("policy.stall.ms", "1000")) / 1000

    def validate(self, request: Any) -> None:
        if request.topic == "stall":
            time.sleep(self.stall_s)
            return
        super().validate(request)
