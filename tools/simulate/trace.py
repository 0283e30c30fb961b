"""The trace of a simulated run (``tools.simulate.cluster``): one line per step of a core, in
field values only, hashed into the run's digest (``tests/raft/sim_traces.txt`` and
``sim_broker_traces.txt`` hold the digests of the recorded seeds)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from server.raft.core import RaftCore
from server.raft.events import (
    ClientAppend,
    Event,
    Outbox,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
)

__all__ = ["trace_line"]


def _key(key: Any) -> Any:
    return None if key is None else (key.id, key.directory_id)


def _endpoint(endpoint: Any) -> Any:
    return None if endpoint is None else (endpoint.name, endpoint.host, endpoint.port)


def _bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _quoted(message: Any) -> str:
    """``repr(repr(message))``, the text of a message's repr as a string literal, without the
    escaping pass when nothing in the text needs escaping but backslashes: the text is a
    repr, so printable (the reprs inside it escaped whatever is not), and an ASCII one holds
    no character repr() would escape but quotes and backslashes."""
    text = repr(message)
    if text.isascii():
        if "\\" in text:
            if "'" not in text:
                return "'" + text.replace("\\", "\\\\") + "'"
            if '"' not in text:
                return '"' + text.replace("\\", "\\\\") + '"'
        elif "'" not in text:
            return "'" + text + "'"
        elif '"' not in text:
            return '"' + text + '"'
    return repr(text)


def _noted(message: Any, texts: dict[int, tuple[Any, str]] | None) -> str:
    """:func:`_quoted` of ``message``, kept in ``texts`` (by id, with the message, so that the
    id is not reused meanwhile) for the receiver's trace line."""
    text = _quoted(message)
    if texts is not None:
        texts[id(message)] = (message, text)
    return text


def _seen(event: Event, seen_text: str | None) -> str:
    """The ``seen`` part of a trace line for one event (:func:`trace_line`)."""
    if isinstance(event, RequestReceived):
        if seen_text is None:
            seen_text = _quoted(event.request)
        return f"('request', {event.request_id!r}, {event.api_version!r}, {seen_text}, {event.listener!r})"
    if isinstance(event, ResponseReceived):
        if seen_text is None:
            seen_text = _quoted(event.response)
        return f"('response', {event.correlation_id!r}, {event.source_id!r}, {seen_text})"
    if isinstance(event, RequestFailed):
        return repr(("failed", event.correlation_id, event.source_id, str(event.reason)))
    if isinstance(event, ClientAppend):
        return repr(("append", event.token, event.values))
    return f"({type(event).__name__!r},)"


def trace_line(
    now: int, node_id: int, event: Event | Sequence[Event], out: Outbox, core: RaftCore,
    seen_text: str | None = None, texts: dict[int, tuple[Any, str]] | None = None,
) -> bytes:
    """One step of a run as the core saw and answered it, in field values only (no class of the
    core's own but the role's name), so that a refactoring of the core that keeps its
    behaviour keeps every run's digest (``tests/raft/sim_traces.txt``).

    The line is ``repr((now, node_id, seen, did, role, epoch))`` with ``seen`` the event's
    fields (a tuple of each event's for a step of several), ``did`` the Outbox's in its field order (a message as the text of its repr, batch
    bytes as their ``_bytes`` digests) and ``role`` the name of the role's class, written
    out piece by piece: a step does little, and the repr of a tuple of mostly empty parts
    costs more than the parts.

    ``seen_text`` is ``_quoted`` of the event's message when the caller has it (the sender's
    line made it), and ``texts`` collects the ``_quoted`` of each message sent or answered,
    by id (with the message, which it keeps alive), for the receiver's line."""
    if isinstance(event, Sequence):  # one step of several events (appends merged)
        seen = _seen(event[0], seen_text) if len(event) == 1 else "(" + ", ".join(_seen(e, None) for e in event) + ",)"
    else:
        seen = _seen(event, seen_text)
    election = out.election_state
    install = out.install_snapshot
    # most of an Outbox is empty: its lists are made only when they hold something
    appends = [_bytes(data) for data in out.appends] if out.appends else []
    sends = ", ".join(
        f"({s.correlation_id!r}, {s.destination_id!r}, {_endpoint(s.endpoint)!r}, {_noted(s.request, texts)}, "
        f"{s.timeout_ms!r})" for s in out.sends
    ) if out.sends else ""
    replies = ", ".join(
        f"({r.request_id!r}, {_noted(r.response, texts)})" for r in out.replies
    ) if out.replies else ""
    committed = [
        (b.base_offset, b.last_offset, b.epoch, b.is_control, _bytes(b.data)) for b in out.committed
    ] if out.committed else []
    results = [
        (r.token, r.base_offset, r.last_offset, r.epoch, int(r.error_code)) for r in out.append_results
    ] if out.append_results else []
    did = (
        f"{None if election is None else (election.epoch, election.leader_id, _key(election.voted_key))!r}, "
        f"{out.truncate_to!r}, {None if install is None else (tuple(install[0]), _bytes(install[1]))!r}, "
        f"{appends!r}, {out.high_watermark!r}, [{sends}], [{replies}], {out.flush!r}, "
        f"{None if out.load_snapshot is None else tuple(out.load_snapshot)!r}, {committed!r}, {results!r}, "
        f"{out.next_deadline_ms!r}"
    )
    return f"({now!r}, {node_id!r}, {seen}, ({did}), {type(core.state).__name__!r}, {core.epoch!r})".encode()
