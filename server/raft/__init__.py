"""server.raft: the sans-IO KRaft core (KIP-595 elections and replication, KIP-630 snapshots,
KIP-853 voter sets, KIP-996 pre-vote).

Entry point: :class:`server.raft.core.RaftCore` -- ``step(now_ms, event) -> Outbox`` (events and
the Outbox ordering contract in :mod:`server.raft.events`). Roles and the transition table are
in :mod:`server.raft.roles`; one module per RPC handles it (``vote``, ``begin_quorum_epoch``,
``end_quorum_epoch``, ``fetch``, ``fetch_snapshot``, ``describe_quorum``, ``add_raft_voter``,
``remove_raft_voter``, ``update_raft_voter``); the log seam and its in-memory fake are in :mod:`server.raft.log`;
control records in :mod:`server.raft.control`; value types in :mod:`server.raft.types`. This
package does no I/O and never imports trio.
"""
