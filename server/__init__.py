"""server: the KRaft controller node, the top of kwire's layer stack below ``tools``.

* :mod:`server.raft`: the sans-IO KRaft core (KIP-595 elections and replication, KIP-630
  snapshots, KIP-853 voter sets, KIP-996 pre-vote), one module per RPC, and the ``RaftLog``
  seam (``ReplicatedLog``).
* :mod:`server.net`: the Trio listeners that serve Kafka's protocol, and the outbound client
  connection.
* :mod:`server.node`: the Trio process that drives the core with requests, responses, timers
  and the disk.
* :mod:`server.config`: ``server.properties`` as a typed ``KRaftConfig``.
* :mod:`server.storage_raft_log`: the on-disk metadata log as the core's ``MutableRaftLog``
  (``KafkaMetadataLog``).
"""
