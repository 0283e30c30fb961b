"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), both ends, as Kafka's
``ScramSaslServer`` and ``ScramSaslClient`` speak them (KIP-84), without I/O.

The server keeps, per user and mechanism, only the salt, the iteration count, ``StoredKey`` and
``ServerKey`` (a :class:`ScramCredential`). A login is two round trips::

    client-first  n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 proof>
    server-final  v=<base64 server signature>

and the server accepts the proof when ``H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey``.

kwire does not use a SCRAM library here: the one on PyPI (``scramp``) refuses salts shorter
than 12 bytes, which Kafka accepts (``kafka-storage format --add-scram 'SCRAM-SHA-256=[...,
salt="c2FsdA==",...]'``), so a credential Kafka serves would not log in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from storage.scram import DIGESTS, ScramCredential, credential_from_password

__all__ = ["DIGESTS", "ScramClient", "ScramCredential", "ScramFailure", "ScramServer", "credential_of"]

MIN_ITERATIONS = 4096
"""The fewest iterations a credential may have (``ScramMechanism.minIterations``)."""


class ScramFailure(Exception):
    """The exchange failed; the message says why (for the log, never for the client)."""


def credential_of(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of ``password`` for ``mechanism`` (``storage.scram``)."""
    return credential_from_password(DIGESTS[mechanism], password, salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    """``a=value`` pairs of a SCRAM message (values may hold ``=``)."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramFailure(f"invalid SCRAM attribute {part!r}")
        out.setdefault(key, value)
    return out


def _sasl_name(text: str) -> str:
    """A saslname decoded: ``=2C`` is ``,`` and ``=3D`` is ``=`` (RFC 5802 5.1)."""
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramFailure("invalid username encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramServer:
    """One login on the server side. ``lookup(user)`` gives the user's credential for this
    mechanism or None; ``nonce`` is this side's random nonce (printable, no comma)."""

    def __init__(self, mechanism: str, lookup: object, nonce: str) -> None:
        self.digest = DIGESTS[mechanism]
        self._lookup = lookup
        self._nonce = nonce
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._full_nonce = ""

    def first(self, client_first: bytes) -> bytes:
        """The server-first message for ``client_first``. Raises ScramFailure (unknown user,
        a malformed message, a credential of too few iterations)."""
        text = client_first.decode("utf-8")
        if not text.startswith(("n,", "y,")):
            raise ScramFailure("channel binding is not supported")
        comma = text.index(",", 2)
        self._gs2 = text[:comma + 1]
        authzid = text[2:comma]
        self._client_first_bare = text[comma + 1:]
        fields = _attributes(self._client_first_bare)
        if "n" not in fields or "r" not in fields:
            raise ScramFailure("client-first message without a username or nonce")
        user = _sasl_name(fields["n"])
        if authzid and _sasl_name(authzid.removeprefix("a=")) != user:
            raise ScramFailure("authorization id differs from the username")
        credential = self._lookup(user)  # type: ignore[operator]
        if credential is None:
            raise ScramFailure(f"no SCRAM credential of user {user}")
        if credential.iterations < MIN_ITERATIONS:
            raise ScramFailure(f"iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}")
        self.user, self._credential = user, credential
        self._full_nonce = fields["r"] + self._nonce
        self._server_first = (f"r={self._full_nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """The server-final message, once the client's proof is checked. Raises ScramFailure."""
        credential = self._credential
        if credential is None:
            raise ScramFailure("client-final message before the client-first")
        text = client_final.decode("utf-8")
        proof_at = text.rfind(",p=")
        if proof_at < 0:
            raise ScramFailure("client-final message without a proof")
        without_proof = text[:proof_at]
        fields = _attributes(without_proof)
        if fields.get("r") != self._full_nonce:
            raise ScramFailure("invalid nonce in the client-final message")
        if fields.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise ScramFailure("invalid channel binding in the client-final message")
        proof = base64.b64decode(text[proof_at + 3:])
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self.digest).digest()
        if len(proof) != len(signature) or not hmac.compare_digest(
            hashlib.new(self.digest, _xor(proof, signature)).digest(), credential.stored_key
        ):
            raise ScramFailure(f"invalid client proof of user {self.user}")
        server_signature = hmac.new(credential.server_key, auth_message, self.digest).digest()
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """One login on the client side (kwire's own connections to a SCRAM listener)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str) -> None:
        self.digest = DIGESTS[mechanism]
        self.mechanism = mechanism
        self._password = password
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={nonce}"
        self._nonce = nonce
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        """The client-first message."""
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message answering ``server_first``. Raises ScramFailure."""
        text = server_first.decode("utf-8")
        fields = _attributes(text)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), int(fields.get("i", "0"))
        if not nonce.startswith(self._nonce) or salt is None or iterations < MIN_ITERATIONS:
            raise ScramFailure(f"invalid server-first message {text!r}")
        self._salted = hashlib.pbkdf2_hmac(self.digest, self._password.encode(), base64.b64decode(salt), iterations)
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = hmac.new(self._salted, b"Client Key", self.digest).digest()
        stored_key = hashlib.new(self.digest, client_key).digest()
        proof = _xor(client_key, hmac.new(stored_key, self._auth_message, self.digest).digest())
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check(self, server_final: bytes) -> None:
        """Check the server's signature. Raises ScramFailure."""
        text = server_final.decode("utf-8")
        fields = _attributes(text)
        if "e" in fields:
            raise ScramFailure(f"the server refused the login: {fields['e']}")
        server_key = hmac.new(self._salted, b"Server Key", self.digest).digest()
        expected = hmac.new(server_key, self._auth_message, self.digest).digest()
        if not hmac.compare_digest(base64.b64decode(fields.get("v", "")), expected):
            raise ScramFailure("the server's signature does not match")
