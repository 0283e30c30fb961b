"""Stock ``kafka-metadata-shell`` reads a kwire image snapshot of tens of thousands of
partitions whole: every topic, and the metadata.version, as each pinned release's shell (4.4's
is 4.3.1's stand-in) loads it into Kafka's own image.

The snapshot is the scale bench's (``tools.bench.scale.measure_point``: topics of 2,000
partitions, RF 3, on 30 brokers, written by kwire's checkpoint writer). The shell runs in one
interactive session that waits until it holds the image
(``tools.stock_metadata_shell.metadata_shell_session``); its one-command mode answers from an empty
image on a file this size, whoever wrote it.
"""

from __future__ import annotations

from pathlib import Path

from compat.harness import KafkaRelease
from messages.generated.partition_record import PartitionRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import decode_record
from storage.snapshot_format import read_snapshot_content
from tools.bench.scale import measure_point
from tools.stock_metadata_shell import metadata_shell_session

PARTITIONS = 20_000


def test_stock_metadata_shell_lists_every_topic_of_a_large_kwire_snapshot(each_kafka: KafkaRelease,
                                                                          tmp_path: Path) -> None:
    point = measure_point(PARTITIONS, 30, tmp_path)
    listed, version, partition = metadata_shell_session(
        each_kafka.version, point["snapshot_path"],
        ["ls /image/topics/byName", "cat /image/features/metadataVersion",
         "cat /image/topics/byName/scale-9/1999"],
        jvm_args=["-Xmx1g"], timeout=180,
    )
    assert sorted(listed.split()) == sorted(f"scale-{i}" for i in range(point["topics"])), listed[-2000:]
    assert point["topics"] == PARTITIONS // 2000
    assert version in ("3.9-IV0", "Optional[3.9-IV0]"), version
    # the last partition of the last topic as kwire wrote it, as Kafka's PartitionRegistration prints it
    records = [decode_record(v)[0] for v in read_snapshot_content(Path(point["snapshot_path"]).read_bytes()).data_records()]
    topic_id = next(r.topic_id for r in records if isinstance(r, TopicRecord) and r.name == "scale-9")
    written = next(r for r in records if isinstance(r, PartitionRecord) and r.topic_id == topic_id and r.partition_id == 1999)
    assert f"replicas={written.replicas}, " in partition, partition
    assert f"isr={written.isr}, " in partition and f"leader={written.leader}, " in partition, partition
