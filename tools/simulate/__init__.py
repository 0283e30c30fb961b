"""The deterministic simulation of a KRaft controller quorum, on one virtual clock from one
seed: the cores (``server.raft``) over an in-memory network and log (``cluster``, ``network``,
``nodes``, ``invariants``, ``trace``), the node's own controller host beside each core with
simulated brokers and an admin (``brokers``, ``broker_clients``, ``broker_checks``), the seeded
scenarios the tests run (``scenarios``, ``stray``, ``broker_run``), and ``kwire simulate``: a
fleet of simulated brokers under a named scenario, reported as figures and plots (``fleet``, ``fleet_spec``,
``fleet_scenarios``, ``report``, ``command``)."""
