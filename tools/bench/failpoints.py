"""Failpoints section: what the failpoints (``server.failpoints``) cost on the commit path while
none is armed, against the same code built without them, in one run under the same load.

Python has no build flag, so "without" is built here: :func:`without_failpoints` gives a
subclass of :class:`server.raft.core.RaftCore` and of
:class:`server.controller.host.QuorumController` whose methods are compiled again from their own
source with every check of the failpoints taken out (an ``if`` or a conditional expression
whose test names ``failpoints`` or ``_faults`` -- the truth test of the armed points that a
step, a request and a committed batch each pass, and the host's test for held work -- and a
statement that only calls into them), as a build without the feature would have them. "With" is a subclass of
each that changes nothing, so that both sides look their methods up through one more class.

Each side is one node as the node process drives it, without its I/O: a single-voter core over
an in-memory log beside its controller host, stepped by the node's own stepping function
(``server.controller.stepping``), the log's fsync completing at once. The load, the same on
both sides:

* ``workload append``: one append of :data:`RECORDS_PER_APPEND` NoOpRecords of 256 B (as
  ``kwire test-raft-server --record-type no-op`` makes them; 1 ms of TestRaftServer's 20,000
  records/s), as another writer's append beside the host's, committed and replayed;
* ``CreateTopics``: one topic of one partition, appended, committed, replayed and answered;
* ``BrokerHeartbeat``: a registered broker's heartbeat, answered.

A third side, the control, is a second node of the shipped code: with / control - 1 is what
the measurement gives where there is no difference to find, its noise and bias. The sides run
in rotation, run by run, each run the same number of operations, timed in this process's CPU
time (the other processes of a shared machine then stretch a run's wall time, not its figure);
a side's figure is its median run, the best in brackets; with / without - 1 and with / control -
1 are taken run by run, their median and quartiles printed. Beside them, the overhead the checks
can have at most: the checks an operation passes (:func:`checks_per_op`, counted on a node of
its own) times the CPU of one (:func:`check_ns`), over the operation's CPU.
"""

from __future__ import annotations

import ast
import gc
import inspect
import itertools
import random
import statistics
import sys
import textwrap
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.failpoints import Action, Failpoints
from tools.bench.core import Result, SectionError, Settings, calibrate

SECTION = "failpoints"
RECORDS_PER_APPEND = 20
RECORD_SIZE = 256
GUARDS = frozenset({"failpoints", "_faults"})
"""Attribute names whose mention in an ``if`` test marks a failpoint check."""


# ---------------------------------------------------------------------------------------------
# the build without failpoints


def _mentions_guard(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in GUARDS for n in ast.walk(node))


class _StripGuards(ast.NodeTransformer):
    """Takes out each ``if`` statement or ``x if ... else y`` whose test mentions a failpoint
    guard (its ``else`` stays in its place) and each statement that is only a call into the
    failpoints; counts them."""

    def __init__(self) -> None:
        self.removed = 0

    def visit_If(self, node: ast.If) -> Any:  # noqa: N802 - ast.NodeTransformer's naming
        self.generic_visit(node)
        if not _mentions_guard(node.test):
            return node
        self.removed += 1
        return node.orelse or None

    def visit_IfExp(self, node: ast.IfExp) -> Any:  # noqa: N802
        self.generic_visit(node)
        if not _mentions_guard(node.test):
            return node
        self.removed += 1
        return node.orelse

    def visit_Expr(self, node: ast.Expr) -> Any:  # noqa: N802
        if isinstance(node.value, ast.Call) and _mentions_guard(node.value.func):
            self.removed += 1
            return None
        return node


def _checks(node: ast.AST) -> bool:
    """Whether ``node`` holds something :class:`_StripGuards` takes out."""
    return any((isinstance(n, ast.If | ast.IfExp) and _mentions_guard(n.test))
               or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and _mentions_guard(n.value.func))
               for n in ast.walk(node))


def strip_failpoint_checks(cls: type) -> tuple[dict[str, Callable[..., Any]], int]:
    """The methods of ``cls`` (its own, not inherited) that check a failpoint, compiled again
    from their source without those checks, by name, and how many checks were taken out.
    Raises SectionError when a method cannot be rebuilt alone (it calls ``super()``, whose
    class cell would be wrong)."""
    lines, first_line = inspect.getsourcelines(cls)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first_line - 1)  # tracebacks name the source's own lines
    class_def = tree.body[0]
    assert isinstance(class_def, ast.ClassDef)
    stripper = _StripGuards()
    methods: list[ast.stmt] = []
    for stmt in class_def.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name == "__init__" or not _checks(stmt):
            continue
        if any(isinstance(n, ast.Name) and n.id == "super" for n in ast.walk(stmt)):
            raise SectionError(f"{cls.__qualname__}.{stmt.name} calls super(): cannot be rebuilt alone")
        before = stripper.removed
        new = stripper.visit(stmt)
        if not new.body:
            new.body = [ast.Pass()]
        assert stripper.removed > before
        methods.append(new)
    if not methods:
        return {}, 0
    # compiled inside a class of the same name, so that private names are mangled alike
    holder = ast.Module(body=[ast.ClassDef(name=cls.__name__, bases=[], keywords=[], body=methods,
                                           decorator_list=[])], type_ignores=[])
    ast.fix_missing_locations(holder)
    module = sys.modules[cls.__module__]
    namespace = dict(vars(module))
    exec(compile(holder, inspect.getsourcefile(cls) or "<stripped>", "exec"), namespace)  # noqa: S102
    rebuilt = vars(namespace[cls.__name__])
    return {m.name: rebuilt[m.name] for m in methods if isinstance(m, ast.FunctionDef)}, stripper.removed


def without_failpoints(cls: type) -> tuple[type, int]:
    """A subclass of ``cls`` with its failpoint checks taken out (:func:`strip_failpoint_checks`),
    and how many were."""
    methods, removed = strip_failpoint_checks(cls)
    return type(f"{cls.__name__}WithoutFailpoints", (cls,), {"__slots__": (), **methods}), removed


def with_failpoints(cls: type) -> type:
    """A subclass of ``cls`` that changes nothing: the "with" side's classes are as deep as the
    "without" side's."""
    return type(f"{cls.__name__}WithFailpoints", (cls,), {"__slots__": ()})


# ---------------------------------------------------------------------------------------------
# one node without I/O


class Node:
    """A single voter: ``core_cls`` (a RaftCore) over a memory log and ``host_cls`` (a
    QuorumController) beside it, stepped by the node's stepping function, the fsync completing at
    once. The clock stands still after the first turn: no timer fires (no broker session ends, no
    periodic task runs), so each side takes the same path for every operation of its load."""

    def __init__(self, core_cls: type, host_cls: type, failpoints: Failpoints | None = None) -> None:
        from server.controller.operation_context import ControllerConfig
        from server.raft.events import Tick
        from server.raft.log import MemoryRaftLog
        from server.raft.types import Endpoint, QuorumConfig, ReplicaIdentity, VoterSet
        from storage.bootstrap import default_bootstrap_metadata
        from tools.raft_load_records import record_template

        self.now = 1
        self.heartbeat: Callable[[], Any] | None = None
        """Broker 5's next heartbeat once :func:`_broker` registered it."""
        self.replies: list[tuple[Any, Any]] = []
        self.log = MemoryRaftLog()
        self.core = core_cls(
            identity=ReplicaIdentity(1, cluster_id="bench", endpoints=(Endpoint("CONTROLLER", "localhost", 9093),)),
            log=self.log, voters=VoterSet.static({1: ("localhost", 9093)}), rng=random.Random(1), now_ms=0,
            config=QuorumConfig(append_linger_ms=0), failpoints=failpoints,
        )
        config = ControllerConfig(node_id=1, cluster_id="bench", static_config={}, max_idle_interval_ms=0)
        self.host = host_cls(config, bootstrap=default_bootstrap_metadata().records, raft=self.core, now_ms=0,
                             rng=random.Random(7), failpoints=failpoints)
        self._template = record_template(RECORD_SIZE, "no-op")
        self._tokens = itertools.count(1 << 40)
        self._counter = 0
        self.step([Tick()])

    # -- OutboxTarget (server.raft.outbox): nothing waits

    async def persist_election(self, election: Any) -> None:
        """Nothing to persist in memory."""

    async def write_log(self, out: Any) -> None:
        """The core's log changes, to the memory log."""
        from server.raft.outbox import apply_log_changes

        apply_log_changes(self.log, out)

    def send(self, request: Any) -> None:
        """A single voter sends nothing."""

    def reply(self, reply: Any) -> None:
        """Raft answers go nowhere."""

    async def flush(self) -> None:
        """Done at once, in :meth:`step`."""

    async def load_snapshot(self, snapshot_id: Any) -> None:
        """A single voter never loads one."""
        raise AssertionError("a single voter never loads a snapshot")

    def commit(self, batch: Any) -> None:
        """A committed batch, to the host."""
        self.host.commit(self.now, batch)

    def append_result(self, result: Any) -> None:
        """The host's appends' results, to the host; another writer's are dropped."""
        self.host.append_result(result)

    def schedule(self, deadline_ms: int | None) -> None:
        """Time moves by hand."""

    # -- driving

    def step(self, events: list[Any], held: tuple[Any, ...] = ()) -> None:
        """One turn of core and host (``server.controller.stepping``)."""
        from server.controller.stepping import run_steps, steps
        from server.raft.outbox import apply_now

        def apply(out: Any) -> bool:
            apply_now(out, self)
            if out.flush:
                self.log.flush()
                return True
            return False

        def carry_out(out: Any) -> None:
            self.replies.extend(out.replies)

        run_steps(steps(self.core, self.host, events, lambda: self.now, held=held), apply, carry_out)

    def request(self, body: Any, version: int) -> Any:
        """Hand ``body`` to the host and step until it is answered; the answer."""
        from server.controller.host import ControllerRequest

        handle = object()
        self.host.request(self.now, ControllerRequest(handle, body, version, "CONTROLLER", self.now))
        self.step([])
        reply = next((r for h, r in reversed(self.replies) if h is handle), None)
        if reply is None:
            raise SectionError(f"{type(body).__name__} got no answer in one turn")
        self.replies.clear()
        return reply

    def workload_append(self) -> None:
        """One append of :data:`RECORDS_PER_APPEND` workload NoOpRecords beside the host's."""
        from server.raft.events import ClientAppend
        from tools.raft_load_records import workload_values

        values = workload_values(self._template, self.core.epoch, self._counter, RECORDS_PER_APPEND, 1)
        self._counter += RECORDS_PER_APPEND
        self.step([], held=(ClientAppend(next(self._tokens), values),))


def _broker(node: Node) -> Callable[[], Any]:
    """Register broker 5 and heartbeat it unfenced (once per node); a function sending its next
    heartbeat."""
    if node.heartbeat is not None:
        return node.heartbeat
    from kwire.uuid import Uuid
    from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
    from messages.generated.broker_registration_request import (
        BrokerRegistrationRequest,
        Feature,
        Listener,
    )

    registered = node.request(BrokerRegistrationRequest(
        broker_id=5, cluster_id="bench", incarnation_id=Uuid.from_longs(5, 1),
        listeners=[Listener(name="PLAINTEXT", host="b", port=9092, security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=1, max_supported_version=100)],
        rack=None, log_dirs=[Uuid.from_longs(5, 99)]), 4)
    if registered.error_code:
        raise SectionError(f"BrokerRegistration answered error {registered.error_code}")

    def heartbeat() -> Any:
        return node.request(BrokerHeartbeatRequest(
            broker_id=5, broker_epoch=registered.broker_epoch, want_fence=False,
            current_metadata_offset=node.core.high_watermark - 1), 1)

    for _ in range(3):
        if not heartbeat().is_fenced:
            node.heartbeat = heartbeat
            return heartbeat
    raise SectionError("broker 5 stayed fenced")


def _create_topic(node: Node) -> Callable[[], Any]:
    """A function creating the next topic ``t<n>`` of one partition; it returns the answer."""
    from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest

    names = itertools.count()

    def create() -> Any:
        topic = CreatableTopic(name=f"t{next(names)}", num_partitions=1, replication_factor=1)
        answer = node.request(CreateTopicsRequest(topics=[topic], timeout_ms=1000), 7)
        if answer.topics[0].error_code:
            raise SectionError(f"CreateTopics answered error {answer.topics[0].error_code}")
        return answer

    return create


RUNS, QUICK_RUNS = 21, 5


def _timed(op: Callable[[], object], loops: int) -> tuple[float, float]:
    """``(wall ns, CPU ns)`` per call of ``loops`` calls of ``op`` (CPU: this process's, which
    another process's load on the machine does not inflate)."""
    gc.collect()
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    for _ in range(loops):
        op()
    return (time.perf_counter_ns() - t0) / loops, (time.process_time_ns() - c0) / loops


SIDES = ("with", "without", "control")
"""The sides of a run: the shipped code (failpoints compiled in, none armed), the code compiled
again without the checks, and a second node of the shipped code, whose difference from the
first is the measurement's own noise and bias (an A/A control)."""


@dataclass(slots=True)
class Runs:
    """Every side's runs of one load: per-op wall and CPU ns of each run, ``loops`` ops a run
    (the same on every side, so that their logs and images grow alike)."""

    loops: int
    wall: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})

    def excess(self, side: str, over: str) -> list[float]:
        """``side`` / ``over`` - 1 of the CPU per op, run by run."""
        return [a / b - 1 for a, b in zip(self.cpu[side], self.cpu[over], strict=True)]


def measure(ops: dict[str, Callable[[], object]], runs: int, min_time_s: float) -> Runs:
    """``runs`` runs of each side of :data:`SIDES`, alternating, the side going first rotated
    every run, each run ``loops`` ops long, ``loops`` calibrated once on the "with" side (the
    other sides then make as many calls first)."""
    calls = 0

    def counted() -> object:
        nonlocal calls
        calls += 1
        return ops["with"]()

    loops = calibrate(counted, min_time_s)
    for side in SIDES[1:]:  # as many calls as calibrating made, so that every side's state grew alike
        for _ in range(calls):
            ops[side]()
    measured = Runs(loops)
    for n in range(runs):
        for k in range(len(SIDES)):
            side = SIDES[(n + k) % len(SIDES)]
            wall, cpu = _timed(ops[side], loops)
            measured.wall[side].append(wall)
            measured.cpu[side].append(cpu)
    return measured


class CountingFailpoints(Failpoints):
    """Failpoints that count how often a path asks whether anything is armed (``armed`` read):
    the number of checks an operation passes."""

    __slots__ = ("_armed", "reads")

    def __init__(self, draw: Callable[[], float]) -> None:
        self.reads = 0
        super().__init__(draw)

    @property  # type: ignore[override]
    def armed(self) -> dict[str, Action]:
        """The armed points, counted."""
        self.reads += 1
        return self._armed

    @armed.setter
    def armed(self, value: dict[str, Action]) -> None:
        self._armed = value


def checks_per_op(make: Callable[[Node], Callable[[], object]], ops: int = 50) -> float:
    """How many failpoint checks (``armed`` reads) one operation of a load passes, on a node of
    its own with counting failpoints."""
    from server.controller.host import QuorumController
    from server.raft.core import RaftCore

    points = CountingFailpoints(random.Random(1).random)
    node = Node(RaftCore, QuorumController, points)
    _broker(node)
    op = make(node)
    op()
    before = points.reads
    for _ in range(ops):
        op()
    return (points.reads - before) / ops


def check_ns() -> float:
    """CPU ns of one check while nothing is armed (``if points.armed:``) less an empty
    statement, best of five."""
    points = Failpoints(random.Random(1).random)
    n = 1_000_000
    env = {"points": points}
    best_check = min(timeit.repeat("if points.armed: pass", globals=env, number=n, repeat=5, timer=time.process_time))
    best_empty = min(timeit.repeat("pass", globals=env, number=n, repeat=5, timer=time.process_time))
    return max(0.0, best_check - best_empty) / n * 1e9


def run(args: Any) -> list[Result]:
    from server.controller.host import QuorumController
    from server.raft.core import RaftCore

    settings = Settings.from_args(args)
    runs = getattr(args, "runs", None) or (QUICK_RUNS if getattr(args, "quick", False) else RUNS)
    core_without, core_checks = without_failpoints(RaftCore)
    host_without, host_checks = without_failpoints(QuorumController)
    if not core_checks or not host_checks:
        raise SectionError(f"found {core_checks} failpoint checks in RaftCore and {host_checks} in QuorumController: "
                           "the section no longer sees the checks it compares")
    core_with, host_with = with_failpoints(RaftCore), with_failpoints(QuorumController)
    nodes = {"with": Node(core_with, host_with), "without": Node(core_without, host_without),
             "control": Node(core_with, host_with)}
    if nodes["with"].host.failpoints.armed or nodes["with"].core.failpoints.armed:
        raise SectionError("a failpoint is armed: the section measures them off")
    one_check_ns = check_ns()
    print(f"failpoints: one single-voter node without I/O per side; without = RaftCore and QuorumController "
          f"compiled again with {core_checks} + {host_checks} failpoint checks taken out; control = a second "
          f"node of the shipped code (A/A); {runs} runs per side, in rotation; CPU time of this process per "
          f"op; one check (`if points.armed:`, nothing armed) {one_check_ns:.1f} ns", flush=True)
    for node in nodes.values():
        _broker(node)  # CreateTopics needs a broker
    loads: list[tuple[str, Callable[[Node], Callable[[], object]], str]] = [
        ("workload append", lambda n: n.workload_append,
         f"{RECORDS_PER_APPEND} NoOpRecords of {RECORD_SIZE} B appended, committed and replayed"),
        ("CreateTopics", _create_topic, "one topic of one partition appended, committed, replayed and answered"),
        ("BrokerHeartbeat", _broker, "a registered, unfenced broker's heartbeat answered"),
    ]
    results: list[Result] = []
    lines = []
    for what, make, conditions in loads:
        measured = measure({side: make(node) for side, node in nodes.items()}, runs, settings.min_time_s)
        over, noise = measured.excess("with", "without"), measured.excess("with", "control")
        cpu = {side: statistics.median(v) / 1e3 for side, v in measured.cpu.items()}
        best = {side: min(v) / 1e3 for side, v in measured.cpu.items()}
        share = statistics.median(c / w for c, w in zip(measured.cpu["with"], measured.wall["with"], strict=True))
        checks = checks_per_op(make)
        expected = checks * one_check_ns / (cpu["without"] * 1e3)
        lines.append(f"  {what}: CPU per op with {cpu['with']:.2f} us ({best['with']:.2f}), without "
                     f"{cpu['without']:.2f} us ({best['without']:.2f}), control {cpu['control']:.2f} us; "
                     f"with/without - 1 = {statistics.median(over):+.2%} (quartiles {_quartiles(over)}), "
                     f"with/control - 1 = {statistics.median(noise):+.2%} (quartiles {_quartiles(noise)}); "
                     f"{checks:.1f} checks per op x {one_check_ns:.1f} ns = {expected:.3%} expected; "
                     f"CPU share {share:.0%}")
        results.append(Result(
            section=SECTION, what=f"{what}: CPU per op, failpoints compiled in and off", unit="us/op",
            kwire=cpu["with"], kwire_best=best["with"], reference=cpu["without"], reference_best=best["without"],
            reference_name="the same code without failpoint checks",
            conditions=f"{conditions}; {runs} runs/side in rotation, {measured.loops} ops per run",
            higher_is_better=False,
            extra={"with_over_without": over, "with_over_control": noise, "checks_per_op": checks,
                   "check_ns": one_check_ns, "cpu_ns": measured.cpu, "wall_ns": measured.wall},
        ))
    print("\n".join(lines), flush=True)
    return results


def _quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{q[0]:+.2%} .. {q[2]:+.2%}"
