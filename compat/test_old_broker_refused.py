"""A stock 3.6.2 broker on a quorum finalized past it (the mixed-version trap): kwire refuses its
registration with Kafka's error and logs Kafka's text, as a stock 4.4.0 controller does
(``make nightly``, ``KWIRE_OLD_BROKER_REFUSAL=1``).

One controller (a static quorum of one voter) formatted with ``--release-version LEVEL``, first a
stock 4.4.0 one, then kwire, and one stock 3.6.2 broker started on it. A 3.6 broker sends
BrokerRegistration v1 listing metadata.version 1-14 (3.3-IV3 to 3.6-IV2) and no log directories:

* at 3.7-IV1 (level 16, before directory assignment) ``ClusterControlManager.registerBroker``
  refuses it with UNSUPPORTED_VERSION: "Unable to register because the broker does not support
  finalized version 16 of metadata.version. The broker wants a version between 1 and 14,
  inclusive.";
* at 4.4-IV2 the log directory check comes first: INVALID_REGISTRATION, "No directories
  specified in request". A 3.6 client does not know that code (119, added in 3.7), so the
  broker reads and logs it as UNKNOWN_SERVER_ERROR (``Errors.forCode``).

The broker logs the error name the controller answered ("Unable to register broker 101 because
the controller returned error ...") and retries; the controller logs Kafka's text in
QuorumController's "registerBroker: event failed with ..." line (the stock controller's logger
raised to INFO here). Both controllers' lines and the broker's error must agree with the
expectation above.

Not collected unless ``KWIRE_OLD_BROKER_REFUSAL`` is set (compat/conftest.py). Cost: about 35 s
and 9 CPU-s per level (two controllers, two 3.6.2 broker JVMs) on a loaded 2-core machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compat.harness import CLUSTER_ID, START_TIMEOUT_S, KafkaRelease, Quorum, free_port, wait_until
from compat.kafka import require_release
from compat.test_broker_rpcs import REFUSAL_LINE
from tools.stock_brokers import StockBrokers

pytestmark = pytest.mark.compat

BROKER_RELEASE = "3.6.2"
CONTROLLER_RELEASE = "4.4.0"
BROKER_ID = 101
REFUSALS = {
    "3.7-IV1": ("UNSUPPORTED_VERSION", "UnsupportedVersionException",
                "Unable to register because the broker does not support finalized version 16 of metadata.version. "
                "The broker wants a version between 1 and 14, inclusive."),
    "4.4-IV2": ("UNKNOWN_SERVER_ERROR", "InvalidRegistrationException", "No directories specified in request"),
}
"""metadata.version -> (the error the broker logs it was answered, the controller's exception,
its message)."""
REFUSED_S = 90.0
"""How long the broker may take to start and be refused (a JVM start on a loaded machine)."""


def _refusal(controller_out: Path, broker_out: Path) -> tuple[str, str, str | None] | None:
    """(the error the broker logged, the controller's exception and message) once both logged
    a refusal, else None."""
    if not controller_out.exists() or not broker_out.exists():
        return None
    controller = [m for line in controller_out.read_text(errors="replace").splitlines()
                  if (m := REFUSAL_LINE.search(line))]
    broker = re.findall(r"Unable to register broker \d+ because the controller returned error (\w+)",
                        broker_out.read_text(errors="replace"))
    if not controller or not broker:
        return None
    return broker[0], controller[0].group(1), controller[0].group(2)


def _refused(kind: str, level: str, root: Path) -> tuple[str, str, str | None]:
    """Start one ``kind`` controller at ``level`` and a 3.6.2 broker on it; what each logged."""
    (root / "controller").mkdir(parents=True)
    quorum = Quorum(KafkaRelease(CONTROLLER_RELEASE), root / "controller", {1} if kind == "kwire" else set(),
                    dynamic=False, ids=(1,), format_args=["--release-version", level])
    # the stock controller's refusals are QuorumController INFO lines; the harness runs it at WARN
    with open(quorum.logging, "a", encoding="utf-8") as config:
        config.write("logger.qc.name = org.apache.kafka.controller.QuorumController\nlogger.qc.level = INFO\n")
    brokers: StockBrokers | None = None
    try:
        quorum.start(1)
        quorum.wait_leader(START_TIMEOUT_S)
        brokers = StockBrokers.create(
            root / "broker", BROKER_RELEASE, cluster_id=CLUSTER_ID, bootstrap_controllers=quorum.bootstrap,
            ports={BROKER_ID: free_port()}, quorum_voters=f"1@localhost:{quorum.ports[1]}",
        )
        brokers.start()
        node = brokers.nodes[BROKER_ID]
        found = wait_until(
            f"{kind} refusing a {BROKER_RELEASE} broker at {level}",
            lambda: _refusal(root / "controller" / "1.out", node.stdout_path), REFUSED_S,
            alive=[p for p in (quorum.procs[1], node.process) if p is not None],
        )
        assert found is not None
        return found
    finally:
        try:
            if brokers is not None:
                brokers.stop(timeout_s=10.0)  # never registered: nothing to shut down in a controlled way
        finally:
            quorum.stop()


@pytest.mark.parametrize("level", list(REFUSALS))
def test_an_older_broker_is_refused_with_kafkas_error_and_text(level: str, tmp_path: Path) -> None:
    require_release(BROKER_RELEASE)
    expected = REFUSALS[level]
    for kind in ("stock", "kwire"):
        assert _refused(kind, level, tmp_path / kind) == expected, kind
