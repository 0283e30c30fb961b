"""The error a controller operation answers with (Kafka's ``ApiError``)."""

from __future__ import annotations

from kwire.errors import Errors

__all__ = ["ApiError"]


class ApiError(Exception):
    """An operation refused with ``error`` (an ``Errors`` code) and ``message`` (Kafka's text,
    or None where Kafka sends none)."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message
