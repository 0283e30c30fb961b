"""The harness against stock Apache Kafka: pinned releases, their jars, a Java codec oracle and
the compatibility tests. Not installed; run from the repository root (``pytest compat``)."""
