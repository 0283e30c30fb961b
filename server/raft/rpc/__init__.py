"""The KRaft RPC handlers, one module per RPC (Kafka's ``KafkaRaftClient`` handle/build methods
for each API, grouped as ``raft/internals`` groups the client's parts): Vote (KIP-595/KIP-996
pre-vote), BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot (KIP-630), DescribeQuorum, and
the KIP-853 voter changes AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

Each module exports ``VERSIONS`` and ``handle_request(ctx, now_ms, event)``; an RPC the core
sends also exports ``handle_response`` and optionally ``on_failure``. Handlers see the core only
through ``server.raft.context.RaftContext``; ``server.raft.registry`` is the one table that
routes to them.
"""
