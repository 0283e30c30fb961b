"""Failpoints: named places on the controller and raft paths where a test can make a node
misbehave at run time (a delay, an error answer, a dropped answer, or a halt), each with a
probability. Nothing is armed by default.

A failpoint is pure data: :class:`Failpoints` holds the armed :class:`Action` per point name,
reads no clock and draws no randomness of its own (the caller injects ``draw``, a function
returning a float in [0, 1), e.g. a ``random.Random``'s ``random``), so the sans-IO packages
``server.raft`` and ``server.controller`` may consult it. The node arms and clears points from
its HTTP endpoint beside ``/metrics`` (``server.node.metrics``) or ``kwire failpoint``.

The check on a path is :meth:`Failpoints.hit`: with nothing armed it is one truth test of a
dict, so a point costs about one method call while off.

Actions (:func:`parse_action` reads their text form):

* ``delay(MS)``: the work at the point waits ``MS`` milliseconds without blocking the loop (the
  sans-IO host and core hold it and let it in by deadline);
* ``error(CODE)``: the request is answered with the Kafka error ``CODE`` (e.g. 41,
  NOT_CONTROLLER) instead of being run;
* ``drop``: the request gets no answer at all (the client times out);
* ``halt``: the node stops at once: the injected ``halt`` runs (by default it raises
  :class:`FailpointHalt`, which the node does not catch, so its tasks unwind and it stops; a
  crash without cleanup is a kill -9 of its process).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kwire.errors import Errors

__all__ = ["KINDS", "POINTS", "Action", "FailpointHalt", "Failpoints", "parse_action"]

KINDS = ("delay", "error", "drop", "halt")
"""The action kinds."""

POINTS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "controller.request": ("any controller RPC as it arrives on the controller (before admission)", KINDS),
    "controller.heartbeat": ("a BrokerHeartbeat request as it arrives on the controller", KINDS),
    "raft.fetch": ("a raft Fetch request as it arrives, before it is answered (the leader's fetch answer)", KINDS),
    "raft.append": ("the controller's append to the leader's log (error: the append is refused with that code)",
                    ("error", "halt")),
    "controller.commit": ("a committed batch handed to the controller (delay: replayed late, in order)",
                          ("delay", "halt")),
    "snapshot.write": ("a built metadata snapshot about to be written (drop and error skip it)", KINDS),
}
"""Every point name -> (where it sits, the action kinds it takes)."""

_ACTION = re.compile(r"^\s*(delay|error|drop|halt)\s*(?:\(\s*(-?\d+)\s*\))?\s*$")


class FailpointHalt(Exception):  # noqa: N818 - it is the halt, not an error of the caller
    """A ``halt`` action hit where no halt function was injected."""


@dataclass(frozen=True, slots=True)
class Action:
    """What an armed point does: ``kind`` one of :data:`KINDS`; ``value`` the delay in ms
    (delay) or the Kafka error code (error), 0 otherwise; ``probability`` in (0, 1] that a hit
    fires."""

    kind: str
    value: int = 0
    probability: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown failpoint action {self.kind!r}: one of {', '.join(KINDS)}")
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"probability {self.probability} is not in (0, 1]")
        if self.kind == "delay" and self.value < 0:
            raise ValueError(f"delay {self.value} ms is negative")
        if self.kind == "error":
            if self.value not in Errors.__members__.values() or self.value == Errors.NONE:
                raise ValueError(f"{self.value} is not a Kafka error code")

    def text(self) -> str:
        """The action's text form, as :func:`parse_action` reads it."""
        return f"{self.kind}({self.value})" if self.kind in ("delay", "error") else self.kind

    def to_json(self) -> dict[str, object]:
        """``{"action": text, "probability": p}``."""
        return {"action": self.text(), "probability": self.probability}


def parse_action(text: str, probability: float = 1.0) -> Action:
    """The :class:`Action` written ``delay(MS)``, ``error(CODE)``, ``drop`` or ``halt``;
    raises ValueError for anything else."""
    match = _ACTION.match(text)
    if match is None:
        raise ValueError(f"cannot read failpoint action {text!r}: delay(MS), error(CODE), drop or halt")
    kind, value = match.group(1), match.group(2)
    if (value is None) != (kind in ("drop", "halt")):
        raise ValueError(f"{kind} takes {'no argument' if kind in ('drop', 'halt') else 'one integer argument'}")
    return Action(kind, int(value or 0), probability)


def _no_halt() -> None:
    raise FailpointHalt("failpoint halt")


class Failpoints:
    """The armed points of one node. ``draw()`` returns a float in [0, 1) and decides whether
    a point armed with a probability below 1 fires; ``halt()`` runs when a ``halt`` action
    fires (it should not return; the default raises :class:`FailpointHalt`).

    Arming and clearing replace :attr:`armed` whole, so a reader on another thread always sees
    one consistent mapping."""

    __slots__ = ("_draw", "_halt", "armed", "fired")

    def __init__(self, draw: Callable[[], float], halt: Callable[[], None] = _no_halt) -> None:
        self.armed: dict[str, Action] = {}
        """Point name -> its action; empty while nothing is armed."""
        self.fired: dict[str, int] = {}
        """Point name -> how many times its action fired since it was armed."""
        self._draw = draw
        self._halt = halt

    def arm(self, name: str, action: Action) -> None:
        """Arm point ``name`` (one of :data:`POINTS`, else ValueError) with ``action`` (of a
        kind the point takes, else ValueError)."""
        if name not in POINTS:
            raise ValueError(f"unknown failpoint {name!r}: one of {', '.join(sorted(POINTS))}")
        kinds = POINTS[name][1]
        if action.kind not in kinds:
            raise ValueError(f"{name} takes {', '.join(kinds)}, not {action.kind}")
        self.armed = {**self.armed, name: action}
        self.fired = {**self.fired, name: 0}

    def clear(self, name: str | None = None) -> bool:
        """Disarm point ``name`` (None: every point); whether anything was armed."""
        if name is None:
            had = bool(self.armed)
            self.armed, self.fired = {}, {}
            return had
        if name not in self.armed:
            return False
        self.armed = {k: v for k, v in self.armed.items() if k != name}
        self.fired = {k: v for k, v in self.fired.items() if k != name}
        return True

    def list(self) -> dict[str, dict[str, object]]:
        """Every point: ``{name: {"where": ..., "action": text or None, "probability": p,
        "fired": n}}``."""
        armed, fired = self.armed, self.fired
        out: dict[str, dict[str, object]] = {}
        for name, (where, _) in sorted(POINTS.items()):
            action = armed.get(name)
            entry: dict[str, object] = {"where": where, "action": None}
            if action is not None:
                entry.update(action.to_json(), fired=fired.get(name, 0))
            out[name] = entry
        return out

    def hit(self, name: str) -> Action | None:
        """The action to carry out at point ``name`` now, None (nearly free) when it is not
        armed or its probability draw says no. A ``halt`` calls ``halt()`` here."""
        if not self.armed:
            return None
        action = self.armed.get(name)
        if action is None or (action.probability < 1.0 and self._draw() >= action.probability):
            return None
        self.fired[name] = self.fired.get(name, 0) + 1
        if action.kind == "halt":
            self._halt()
        return action
