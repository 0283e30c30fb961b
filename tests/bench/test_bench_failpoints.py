"""The failpoints section's build without failpoints (``tools.bench.failpoints``): the rebuilt
methods hold no failpoint check where the shipped ones do, and a node built from them takes
the same load to the same log, answers and image as the shipped node. Figures are never
asserted on: benchmarks are not tests."""

from __future__ import annotations

import types

import pytest

from server.controller.host import QuorumController
from server.raft.core import RaftCore
from tools.bench import failpoints


def _names(code: types.CodeType) -> set[str]:
    """Every attribute and global name ``code`` and the code nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


@pytest.mark.parametrize("cls", [RaftCore, QuorumController])
def test_the_rebuilt_methods_check_no_failpoint(cls: type) -> None:
    methods, removed = failpoints.strip_failpoint_checks(cls)
    assert methods and removed >= len(methods)
    for name, rebuilt in methods.items():
        shipped = getattr(cls, name)
        assert _names(shipped.__code__) & failpoints.GUARDS, name
        assert not _names(rebuilt.__code__) & failpoints.GUARDS, name
    # the commit path's entry points are among them
    assert ("step_many" if cls is RaftCore else "commit") in methods


def test_both_builds_take_the_same_load_to_the_same_state() -> None:
    core_without, _ = failpoints.without_failpoints(RaftCore)
    host_without, _ = failpoints.without_failpoints(QuorumController)
    nodes = [failpoints.Node(failpoints.with_failpoints(RaftCore), failpoints.with_failpoints(QuorumController)),
             failpoints.Node(core_without, host_without)]
    answers: list[list[tuple[str, object, int, bool]]] = [[], []]
    for node, seen in zip(nodes, answers, strict=True):
        heartbeat = failpoints._broker(node)
        create = failpoints._create_topic(node)
        for _ in range(3):
            node.workload_append()
            topic = create().topics[0]
            seen.append((topic.name, topic.topic_id, topic.error_code, heartbeat().is_fenced))
    a, b = nodes
    assert a.log.log_end_offset == b.log.log_end_offset > 3 * failpoints.RECORDS_PER_APPEND
    assert a.core.high_watermark == b.core.high_watermark == a.log.log_end_offset
    assert answers[0] == answers[1]
    assert [name for name, *_ in answers[0]] == ["t0", "t1", "t2"]


def test_the_commit_path_passes_a_check_per_operation() -> None:
    """The counting failpoints see the checks an operation passes: at least the core's per
    event, and the host's per request."""
    assert failpoints.checks_per_op(lambda n: n.workload_append, ops=5) >= 1
    assert failpoints.checks_per_op(failpoints._create_topic, ops=5) > failpoints.checks_per_op(
        failpoints._broker, ops=5) >= 1
