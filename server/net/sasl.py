"""SASL authentication on a SASL_PLAINTEXT listener (Kafka's ``SaslServerAuthenticator``; KIP-43,
KIP-152), mechanisms PLAIN and SCRAM-SHA-256/512, and the client side kwire's own connections
use.

A connection to a SASL listener must authenticate before anything but ApiVersions:

1. ``SaslHandshake`` names a mechanism: one the listener does not enable is answered
   UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closed; otherwise NONE
   with the enabled ones. After a v0 handshake the tokens follow as raw size-prefixed frames (the
   unframed exchange of Kafka 0.10); after v1 each is a ``SaslAuthenticate`` request.
2. The mechanism's exchange: PLAIN (``authzid \\0 user \\0 password``) checks the password
   against the listener's ``user_<name>="<password>"`` JAAS options; SCRAM checks the client's
   proof against the credential the metadata log holds (``kafka-configs --add-config
   'SCRAM-SHA-256=[...]'`` or ``kafka-storage format --add-scram``). A failed login is answered
   SASL_AUTHENTICATION_FAILED with Kafka's message (a raw exchange is closed without one), the
   connection closed, and a line with the mechanism, the user and the peer logged.
3. Authenticated, the connection's principal is ``User:<name>`` and every request goes on as on
   any listener; a later SaslHandshake or SaslAuthenticate is the API layer's (it answers
   ILLEGAL_SASL_STATE, as Kafka does without re-authentication).

Any other request before authentication closes the connection.

Re-authentication (KIP-368, ``SaslServerAuthenticator.ReauthInfo``): with
``connections.max.reauth.ms`` set for the mechanism, a login's SaslAuthenticate answer carries
that as ``session_lifetime_ms``, and the session expires then. A SaslHandshake on an
authenticated connection whose session expires starts a re-authentication (at most one a
second; otherwise it is the API layer's, answered ILLEGAL_SASL_STATE): the same exchange again,
on the mechanism of the first login (another mechanism is answered NONE, then the connection is
closed at its first token) and for the same user (another user is refused with "Cannot change
principals during re-authentication"); the new session's lifetime starts then. Any other request
after the session expired closes the connection (``SocketServer.Processor``). Without the
setting (the default) sessions never expire and the lifetime is 0.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kwire.errors import Errors
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_authenticate_response import SaslAuthenticateResponse
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.generated.sasl_handshake_response import SaslHandshakeResponse
from server.net.scram import DIGESTS, ScramClient, ScramCredential, ScramFailure, ScramServer

__all__ = [
    "MECHANISMS",
    "SaslClient",
    "SaslFailure",
    "SaslServerConfig",
    "SaslSession",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The mechanisms kwire serves and speaks."""


class SaslFailure(Exception):
    """A login failed: ``client_message`` is what the client is told (Kafka's text), the
    exception's own message what the log says."""

    def __init__(self, log_message: str, client_message: str) -> None:
        super().__init__(log_message)
        self.client_message = client_message


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    """A SASL listener's settings: its enabled mechanisms (``sasl.enabled.mechanisms``), the
    PLAIN users and passwords of its JAAS configuration, and where SCRAM credentials come from
    (``scram_credential(mechanism, user)``, None for a user without one)."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credential: Callable[[str, str], ScramCredential | None] = lambda mechanism, user: None
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    """``connections.max.reauth.ms`` per mechanism; absent or not above 0: sessions never expire."""


class SaslSession:
    """One connection's authentication, as ``SaslServerAuthenticator`` runs it; with
    ``previous``, the session of a re-authentication of that one's login."""

    def __init__(self, config: SaslServerConfig, previous: SaslSession | None = None) -> None:
        self.config = config
        self.previous = None if previous is None else (previous.mechanism, previous.user)
        """The re-authenticated login's ``(mechanism, user)``; None for a first login."""
        self.lifetime_ms = 0
        """The session's lifetime from the login on, once authenticated; 0: it never expires."""
        self._bad_mechanism: str | None = None
        self.mechanism: str | None = None
        self.raw = False
        """A v0 handshake was accepted: the next frames are raw tokens."""
        self.user: str | None = None
        """The authenticated user, once authenticated."""
        self.failure: str | None = None
        """Why the login failed, for the log (it names the user where the mechanism gave one)."""
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        """The login succeeded."""
        return self.user is not None

    @property
    def what(self) -> str:
        """``authentication`` or ``re-authentication``, as Kafka's messages say."""
        return "authentication" if self.previous is None else "re-authentication"

    def handshake(self, request: SaslHandshakeRequest, version: int) -> tuple[SaslHandshakeResponse, bool]:
        """The handshake's answer and whether the connection closes after it."""
        enabled = list(self.config.mechanisms)
        if self.mechanism is not None or request.mechanism not in enabled:
            error = Errors.ILLEGAL_SASL_STATE if self.mechanism is not None else Errors.UNSUPPORTED_SASL_MECHANISM
            return SaslHandshakeResponse(error_code=error, mechanisms=enabled), True
        self.mechanism = request.mechanism
        self.raw = version == 0
        if self.previous is not None and self.previous[0] != request.mechanism:
            self._bad_mechanism = (f"SASL mechanism '{request.mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self.previous[0]}'")
        return SaslHandshakeResponse(error_code=Errors.NONE, mechanisms=enabled), False

    def authenticate(self, request: SaslAuthenticateRequest) -> tuple[SaslAuthenticateResponse, bool]:
        """A SaslAuthenticate's answer and whether the connection closes after it (a failed
        login: SASL_AUTHENTICATION_FAILED with Kafka's message; a success has the message "").
        Raises SaslFailure for one before any v1 handshake, which closes the connection
        without an answer (Kafka's ``IllegalSaslStateException``)."""
        if self.mechanism is None or self.raw:
            raise SaslFailure("a SaslAuthenticate request before a SaslHandshake", "")
        try:
            token = self.token(bytes(request.auth_bytes))
        except SaslFailure as exc:
            if self._bad_mechanism is not None:
                raise
            self.failure = str(exc)
            return SaslAuthenticateResponse(
                error_code=Errors.SASL_AUTHENTICATION_FAILED, error_message=exc.client_message, auth_bytes=b""
            ), True
        return SaslAuthenticateResponse(error_code=Errors.NONE, error_message="", auth_bytes=token,
                                        session_lifetime_ms=self.lifetime_ms), False

    def token(self, data: bytes) -> bytes:
        """The server's token answering the client's ``data``; the login completes with the
        last. Raises SaslFailure (a re-authentication on another mechanism raises it at once)."""
        mechanism = self.mechanism
        assert mechanism is not None
        if self._bad_mechanism is not None:
            raise SaslFailure(self._bad_mechanism, self._bad_mechanism)
        if mechanism == "PLAIN":
            self._complete(_plain(data, self.config.plain_users))
            return b""
        generic = (f"Authentication failed during {self.what} due to invalid credentials with SASL mechanism "
                   f"{mechanism}")
        try:
            if self._scram is None:
                self._scram = ScramServer(mechanism, lambda user: self.config.scram_credential(mechanism, user),
                                          secrets.token_urlsafe(18))
                return self._scram.first(data)
            answer = self._scram.final(data)
        except (ScramFailure, UnicodeDecodeError, ValueError) as exc:
            raise SaslFailure(f"{mechanism}: {exc}", generic) from None
        assert self._scram.user is not None
        self._complete(self._scram.user)
        return answer

    def _complete(self, user: str) -> None:
        """The login of ``user`` succeeded: the principal must be the re-authenticated one's
        (``ReauthInfo.ensurePrincipalUnchanged``), and the session's lifetime starts."""
        if self.previous is not None and self.previous[1] != user:
            message = f"Cannot change principals during re-authentication from User.{self.previous[1]}: User.{user}"
            raise SaslFailure(message, message)
        self.user = user
        self.lifetime_ms = max(0, self.config.max_reauth_ms.get(self.mechanism or "", 0))


def _plain(data: bytes, users: Mapping[str, str]) -> str:
    """``PlainSaslServer.evaluateResponse``: the user of a valid PLAIN token. Raises
    SaslFailure with Kafka's messages."""
    text = data.decode("utf-8", errors="replace")
    tokens = text.split("\0", 3)
    if len(tokens) != 3:
        message = f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}"
        raise SaslFailure(message, message)
    authzid, user, password = tokens
    if not user:
        raise SaslFailure("PLAIN: no username", "Authentication failed: username not specified")
    if not password:
        raise SaslFailure(f"PLAIN: no password for {user}", "Authentication failed: password not specified")
    expected = users.get(user)
    if expected is None or not secrets.compare_digest(expected.encode(), password.encode()):
        raise SaslFailure(f"PLAIN: invalid username or password for {user}",
                          "Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise SaslFailure(f"PLAIN: {user} asked for authorization id {authzid}",
                          "Authentication failed: Client requested an authorization id that is different from username")
    return user


@dataclass(frozen=True, slots=True)
class SaslClient:
    """How kwire's own connections log in (``sasl.mechanism.controller.protocol`` and the
    listener's JAAS ``username`` and ``password``)."""

    mechanism: str
    username: str
    password: str

    def tokens(self) -> _ClientExchange:
        """A fresh exchange of client tokens."""
        return _ClientExchange(self)


class _ClientExchange:
    def __init__(self, client: SaslClient) -> None:
        self._client = client
        self._scram = (ScramClient(client.mechanism, client.username, client.password, secrets.token_urlsafe(18))
                       if client.mechanism in DIGESTS else None)
        self.done = False

    def first(self) -> bytes:
        if self._scram is None:
            self.done = True
            return f"\0{self._client.username}\0{self._client.password}".encode()
        return self._scram.first()

    def next(self, server_token: bytes) -> bytes | None:
        """The next client token, None when the exchange is complete. Raises ScramFailure."""
        if self._scram is None:
            return None
        if not self.done:
            self.done = True
            return self._scram.final(server_token)
        self._scram.check(server_token)
        return None
