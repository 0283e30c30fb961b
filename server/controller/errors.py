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

    @property
    def exception_name(self) -> str:
        """The simple name of the ``ApiException`` Kafka throws for this code, as its error name
        in camel case plus ``Exception`` (``UNSUPPORTED_VERSION`` ->
        ``UnsupportedVersionException``). That is the rule for the codes controller operations
        refuse with; a few older codes of the client protocol are named otherwise."""
        return "".join(part.capitalize() for part in self.error.name.split("_")) + "Exception"

    def failure_message(self, event: str) -> str:
        """The line Kafka's ``QuorumController`` logs at INFO when the event ``event`` (e.g.
        ``registerBroker``) ends with this error (``EventHandlerExceptionInfo.failureMessage``
        for an ``ApiException``), without its processing time: ``"registerBroker: event failed
        with UnsupportedVersionException. Exception message: Unable to register ..."``. For a
        refusal whose answer carries no message (BrokerRegistration) this is where an operator
        reads the reason."""
        text = f"{event}: event failed with {self.exception_name}."
        return text if self.message is None else f"{text} Exception message: {self.message}"
