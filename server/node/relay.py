"""Answering one request with another's answer: a request that admission opened into an inner
request (``server.controller.admission.Forwarded``) is answered once the inner one is, with
the outer answer admission builds from the inner one."""

from __future__ import annotations

from collections.abc import Callable

from messages.runtime import Message
from server.net import PendingRequest

__all__ = ["relay_answer"]


async def relay_answer(outer: PendingRequest, inner: PendingRequest, answer: Callable[[Message], Message]) -> None:
    """Answer ``outer`` with ``answer(response)`` once ``inner`` is answered with ``response``;
    a failed ``inner`` fails ``outer`` too."""
    try:
        response = await inner.wait()
    except Exception as exc:
        if not outer.done:
            outer.fail(exc)
        return
    if not outer.done:
        outer.respond(answer(response))
