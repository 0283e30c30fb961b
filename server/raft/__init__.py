"""server.raft: the sans-IO KRaft core (KIP-595 elections and replication, KIP-996 pre-vote,
KIP-853 voter sets).

Entry point: :class:`server.raft.core.RaftCore` -- ``step(now_ms, event) -> Outbox``. Roles are
in :mod:`server.raft.roles`, one module per RPC handles that RPC (``vote``,
``begin_quorum_epoch``, ``end_quorum_epoch``, ``fetch``, ``describe_quorum``), the log seam is
:mod:`server.raft.log`. This package does no I/O and never imports trio or socket.
"""
