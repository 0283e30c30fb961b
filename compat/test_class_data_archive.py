"""The class data sharing archive the test runs map into every stock JVM
(``KWIRE_KAFKA_CDS``, tools/stock_kafka.py) is trained on a server: it maps on the release's
classpath, and holds the classes of both of a combined node's halves, which a controller or a
broker would otherwise load and verify from the jars at every start."""

from __future__ import annotations

import re
import subprocess

import pytest

from compat.harness import KafkaRelease
from tools import stock_kafka
from tools.stock_kafka import CDS_ENV

pytestmark = pytest.mark.compat


def test_the_release_archive_is_trained_on_a_controller_and_a_broker(
        each_kafka: KafkaRelease, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CDS_ENV, "1")
    command = stock_kafka.java_command(each_kafka.version, "kafka.Kafka", server=True)
    archive = stock_kafka.class_data_archive(each_kafka.version)
    assert f"-XX:SharedArchiveFile={archive}" in command
    # -Xshare:on fails the JVM when the archive does not map on this JDK and classpath
    listing = subprocess.run(
        [stock_kafka.java_executable(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}",
         "-XX:+PrintSharedArchiveAndExit", "-cp", stock_kafka.classpath(each_kafka.version)],
        capture_output=True, text=True, timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    classes = set(re.findall(r"^\s*\d+: (\S+) ", listing.stdout, re.MULTILINE))
    assert {"org.apache.kafka.controller.QuorumController", "kafka.server.ControllerServer",
            "kafka.server.BrokerServer"} <= classes, sorted(classes)[:20]
