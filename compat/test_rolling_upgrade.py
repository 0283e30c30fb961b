"""A rolling upgrade from Kafka 3.6.2 to 4.4.0 under load on kwire controllers (``make nightly``,
``KWIRE_ROLLING_UPGRADE=1``).

Three kwire controllers (static voters) formatted with ``--release-version 3.6-IV2`` and three
stock 3.6.2 brokers (:class:`compat.release_cluster.ReleaseCluster`); a topic of 3 partitions,
replication factor 3, ``min.insync.replicas=2``; an idempotent acks=all kafka-python producer
(:class:`compat.clients.Load`, which keeps every acknowledged value) and a group-less consumer
running throughout. Then, with the load on:

1. each broker in turn is stopped with SIGTERM (controlled shutdown) and started on 4.4.0 with
   the same data directory, node id and port; the next waits until every running broker lists
   all three and the broker is back in every ISR;
2. stock ``kafka-features --bootstrap-server <broker> upgrade --release-version 4.4``
   (UpdateFeatures forwarded by the broker to the active controller). kafka-tools 4.4.0 is not
   on Maven Central, so the 4.4 line's tools are Kafka 4.3.1's (``kafka.4.4.0.tools.version`` in
   compat/kafka-versions.properties), which refuse that name before sending anything ("Unknown
   metadata.version '4.4'": their production metadata.version is 4.3-IV0, level 30). The upgrade
   is then asked with the name ``version-mapping`` gives, which also moves every other feature to
   its default for that level, and ``describe`` must report it finalized; then
   ``upgrade --feature metadata.version=33`` (4.4-IV2, 4.4.0's production level, which the 4.4.0
   brokers support): where the tool sends it, it must change the finalized level;
3. for group.version, transaction.version and eligible.leader.replicas.version, any level still
   below the highest every node supports is upgraded to it with ``upgrade --feature``; each
   must end finalized at that level, above 0;
4. ``downgrade --feature metadata.version=14`` (back to 3.6-IV2, a safe downgrade, no
   ``--unsafe``) is refused with ``FeatureControlManager.updateMetadataVersion``'s message
   ("Unsupported metadata.version downgrade from <level> to 14. Refusing to perform the requested
   downgrade because it might delete metadata information."), and the same with ``--unsafe``
   ("... Unsafe metadata downgrade is not supported in this version."); metadata.version stays.

With ``KWIRE_ROLLING_UPGRADE_CONTROLLERS=stock`` the same run goes against three stock 4.4.0
controllers (the control of a finding).

Asserted at the end: no send failed, every acknowledged value was consumed, and no partition
was without a live leader (leader -1, or a leader its Metadata answer does not list) for longer
than one broker restart took. The partition leaders are sampled every 250 ms with Metadata
requests to a running broker; the longest offline window and the leader of each leader epoch
are printed (run with ``-s``).

Not collected unless ``KWIRE_ROLLING_UPGRADE`` is set (compat/conftest.py). Cost: about 55 s
and 30 CPU-s (the test's process tree: three kwire controllers, six broker JVM starts, about a
dozen tool JVMs) on a loaded 2-core machine.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import trio

from compat.clients import Consumer, Load
from compat.harness import KafkaRelease, wait_until
from compat.release_cluster import BROKER_START_TIMEOUT_S, ReleaseCluster
from compat.watch import LeaderSampler

pytestmark = [pytest.mark.compat, pytest.mark.slow]

FROM, TO = "3.6.2", "4.4.0"
METADATA_VERSION = "3.6-IV2"
START_LEVEL = 14
LEVEL_4_4 = 33
"""4.4-IV2, ``MetadataVersion.LATEST_PRODUCTION`` of Kafka 4.4.0 (compat/kafka-versions.properties)."""
ASKED_RELEASE = "4.4"
"""What the operator asks for first; the 4.4 line's stand-in tools (4.3.1's) refuse it."""
BROKER_IDS = (101, 102, 103)
TOPIC = "rolling"
FEATURES = ("group.version", "transaction.version", "eligible.leader.replicas.version")
CONTROLLERS_ENV = "KWIRE_ROLLING_UPGRADE_CONTROLLERS"
"""``stock``: the same run on three stock 4.4.0 controllers, the control of a finding."""
RECORDS_PER_S = 500


def _broker_addresses(cluster: ReleaseCluster) -> list[str]:
    """Every broker's client listener but one being moved between release groups."""
    found = []
    for broker_id in sorted(cluster.broker_ids):
        try:
            found.append(cluster.broker_address(broker_id))
        except KeyError:  # restart_on moves it: asked again at the next sample
            continue
    return found


def _features(kafka: KafkaRelease, bootstrap: str, *args: str, check: bool = True) -> tuple[int, str]:
    done = kafka.run_tool("features", ["--bootstrap-server", bootstrap, *args], check=False)
    out = done.stdout + done.stderr
    assert not check or done.returncode == 0, out
    return done.returncode, out


def _described(kafka: KafkaRelease, bootstrap: str) -> dict[str, tuple[str, str]]:
    """``kafka-features describe``: feature -> (SupportedMaxVersion, FinalizedVersionLevel) as
    printed (numbers, or names for metadata.version)."""
    _, out = _features(kafka, bootstrap, "describe")
    found = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+):\s*(\S+)", line))
        if "Feature" in fields:
            found[fields["Feature"]] = (fields.get("SupportedMaxVersion", ""), fields.get("FinalizedVersionLevel", ""))
    assert "metadata.version" in found, out
    return found


async def _finalized_metadata_version(address: str) -> int:
    """The metadata.version level a broker reports finalized in its ApiVersions answer
    (KIP-584), -1 when none."""
    from server.net.client import open_connection

    host, _, port = address.rpartition(":")
    with trio.fail_after(10):
        async with await open_connection(host, int(port), "kwire-rolling", request_timeout_ms=10_000) as conn:
            answer = conn.api_versions_response
    assert answer is not None
    return next((f.max_version_level for f in answer.finalized_features if f.name == "metadata.version"), -1)


def _level(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _production_metadata_version(kafka: KafkaRelease) -> tuple[str, int]:
    """The metadata.version name and level ``kafka-features version-mapping`` gives by default
    (the release's ``MetadataVersion.LATEST_PRODUCTION``)."""
    out = kafka.run_tool("features", ["version-mapping"]).stdout
    m = re.search(r"metadata\.version=(\d+) \((\S+)\)", out)
    assert m, out
    return m.group(2), int(m.group(1))


def test_rolling_upgrade_under_load(tmp_path: Path) -> None:
    started_wall, started_cpu = time.monotonic(), time.process_time()
    new = KafkaRelease(TO)
    stock = os.environ.get(CONTROLLERS_ENV) == "stock"
    with ReleaseCluster(tmp_path, METADATA_VERSION, dict.fromkeys(BROKER_IDS, FROM), kwire_controllers=not stock,
                        controller_release=TO if stock else None) as cluster:
        cluster.start()
        cluster.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
        _create(cluster.bootstrap)
        cluster.wait_in_sync(TOPIC, set(BROKER_IDS), 3)
        sampler = LeaderSampler(lambda: _broker_addresses(cluster), TOPIC)
        sampler.start()
        load = Load(cluster.bootstrap, TOPIC, RECORDS_PER_S)
        consumer = Consumer(cluster.bootstrap, TOPIC)
        load.start()
        consumer.start()
        restarts: dict[int, float] = {}
        try:
            for broker_id in BROKER_IDS:
                began = time.monotonic()
                cluster.restart_on(broker_id, TO)
                cluster.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
                cluster.wait_in_sync(TOPIC, set(BROKER_IDS), 3)
                restarts[broker_id] = time.monotonic() - began
                print(f"broker {broker_id} on {TO}, back in every ISR after {restarts[broker_id]:.1f} s; "
                      f"{len(load.acked)} acknowledged so far")
            target = cluster.broker_address(BROKER_IDS[0])
            name, level = _production_metadata_version(new)
            code, out = _features(new, target, "upgrade", "--release-version", ASKED_RELEASE, check=False)
            print(f"upgrade --release-version {ASKED_RELEASE}: exit {code}: {out.strip()[:300]}")
            if code != 0:  # the stock tool knows no such release: its own production level instead
                _, out = _features(new, target, "upgrade", "--release-version", name)
                print(f"upgrade --release-version {name}: {out.strip()}")
            described = _described(new, target)
            print(f"after the upgrade: {described}")
            assert described["metadata.version"][1] == name, (name, described)
            # the 4.4 line's own level, which the stand-in tool cannot name but may send
            code, out = _features(new, target, "upgrade", "--feature", f"metadata.version={LEVEL_4_4}", check=False)
            print(f"upgrade --feature metadata.version={LEVEL_4_4}: exit {code}: {out.strip()[:400]}")
            described = _described(new, target)
            print(f"after it: {described}")
            if code == 0:
                level = LEVEL_4_4
                name = described["metadata.version"][1]  # "UNKNOWN" to the 4.3.1 tool
            reported = wait_until(
                f"every broker reports metadata.version {level} finalized",
                lambda: {b: trio.run(_finalized_metadata_version, cluster.broker_address(b)) for b in BROKER_IDS},
                60.0, ok=lambda seen: set(seen.values()) == {level}, interval_s=0.5)
            print(f"finalized metadata.version in each broker's ApiVersions: {reported}")
            for feature in FEATURES:
                high, finalized = described.get(feature, ("0", "0"))
                if _level(finalized) < _level(high):
                    _, out = _features(new, target, "upgrade", "--feature", f"{feature}={high}")
                    print(out.strip())
            described = _described(new, target)
            print(f"after the feature upgrades: {described}")
            for feature in FEATURES:
                high, finalized = described[feature]
                assert _level(finalized) == _level(high) > 0, (feature, described)
            code, out = _features(new, target, "downgrade", "--feature", f"metadata.version={START_LEVEL}", check=False)
            print(f"downgrade --feature metadata.version={START_LEVEL}: exit {code}: {out.strip()}")
            refused = (f"Unsupported metadata.version downgrade from {level} to {START_LEVEL}. Refusing to "
                       "perform the requested downgrade because it might delete metadata information.")
            assert code != 0 and refused in out, out
            code, out = _features(new, target, "downgrade", "--unsafe", "--feature",
                                  f"metadata.version={START_LEVEL}", check=False)
            print(f"downgrade --unsafe --feature metadata.version={START_LEVEL}: exit {code}: {out.strip()}")
            refused = f"Unsupported metadata.version downgrade from {level} to {START_LEVEL}. Unsafe metadata downgrade is not supported in this version."
            assert code != 0 and refused in out, out
            assert _described(new, target)["metadata.version"][1] == name
        except BaseException:
            load.close()
            consumer.close()
            sampler.stop()
            raise
        load.stop()
        acked = set(load.acked)
        missing = consumer.wait_for(acked, 120.0)
        consumer.close()
        sampler.stop()
    duplicates = sum(n > 1 for n in consumer.seen.values())
    print(f"acknowledged {len(acked)}, failed {len(load.failed)}, consumed {sum(consumer.seen.values())} "
          f"({len(set(consumer.seen))} distinct, {duplicates} more than once), missing {len(missing)}")
    print(f"longest offline window {sampler.longest_offline_s:.2f} s (per partition "
          f"{ {p: round(s, 2) for p, s in sorted(sampler.longest.items())} }); {sampler.samples} samples, "
          f"{sampler.unanswered} unanswered")
    print("leader of each epoch: " + ", ".join(
        f"p{p}@{e}={leader}" for (p, e), leader in sorted(sampler.epochs.items())))
    print(f"restarts {restarts}; wall {time.monotonic() - started_wall:.0f} s, "
          f"test process CPU {time.process_time() - started_cpu:.0f} s")
    assert sampler.samples > 0 and sampler.unanswered < sampler.samples / 10, (sampler.samples, sampler.unanswered)
    assert not load.failed, load.failed[:5]
    assert acked and not missing, f"{len(missing)} acknowledged values never consumed, e.g. {sorted(missing)[:3]}"
    assert sampler.longest_offline_s <= max(restarts.values()), (sampler.longest, restarts)


def _create(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-rolling", request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 3, topic_configs={"min.insync.replicas": "2"})], timeout_ms=30_000)
    finally:
        admin.close()
