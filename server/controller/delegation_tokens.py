"""Delegation tokens as the committed records leave them (Kafka's ``DelegationTokenControlManager``
image part; KIP-48, in KRaft from metadata.version 3.6-IV2 by KIP-900).

Every node replays DelegationTokenRecord (a token created or renewed: its owner, requester,
renewers, issue, maximum and expiration times and id) and RemoveDelegationTokenRecord (its id)
into one :class:`DelegationTokenImage`, so a kwire controller keeps the tokens a stock one
issued, and snapshots write a DelegationTokenRecord per token. The token RPCs themselves are not
served yet. No I/O, no clock.
"""

from __future__ import annotations

from messages.generated.delegation_token_record import DelegationTokenRecord
from messages.generated.remove_delegation_token_record import RemoveDelegationTokenRecord
from messages.runtime import Message
from server.controller.result import Record

__all__ = ["DELEGATION_TOKEN_LEVEL", "DelegationTokenImage"]

DELEGATION_TOKEN_LEVEL = 14
"""metadata.version 3.6-IV2: delegation tokens live in the metadata log
(``isDelegationTokenSupported``)."""


class DelegationTokenImage:
    """Tokens by id, each as its latest record, in the order first issued."""

    def __init__(self) -> None:
        self.tokens: dict[str, DelegationTokenRecord] = {}

    def replay(self, message: Message) -> None:
        """Replay a DelegationTokenRecord (issue or renewal) or a RemoveDelegationTokenRecord
        (a removal of a token not held changes nothing, as in Kafka)."""
        if isinstance(message, DelegationTokenRecord):
            self.tokens[message.token_id] = message
        elif isinstance(message, RemoveDelegationTokenRecord):
            self.tokens.pop(message.token_id, None)

    def snapshot_records(self) -> list[Record]:
        """Every token as its DelegationTokenRecord (``DelegationTokenImage.write``)."""
        return [(record, 0) for record in self.tokens.values()]
