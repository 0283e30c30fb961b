"""storage: the metadata log directory, byte for byte as Apache Kafka's KRaft writes it.

Synchronous file I/O only (the node runs it off the event loop with ``trio.to_thread``); this
package never imports trio. Modules, one concept each:

* :mod:`storage.compression` -- the five batch codecs (none, gzip, xerial snappy, lz4 frame, zstd)
* :mod:`storage.batch_layout` -- record batch v2 header layout, attribute bits, sentinels
* :mod:`storage.records` -- record batch v2: the zero-copy view, CRC32C, its records
* :mod:`storage.record_codec` -- one record: decoding and encoding (``DefaultRecord``)
* :mod:`storage.record_loops` -- the per-record loops, compiled (``_crecords``) or Python
* :mod:`storage.batch_builder` -- building batches (``MemoryRecordsBuilder``)
* :mod:`storage.batch_scan` -- walking a buffer of batches, its longest valid prefix
* :mod:`storage.control` -- control record keys and values (LeaderChange, Voters, snapshot markers)
* :mod:`storage.index` -- ``.index`` and ``.timeindex`` files
* :mod:`storage.segment` -- one ``.log`` segment with its indexes, append and recovery
* :mod:`storage.checkpoint` -- the checkpoint text format those files share
* :mod:`storage.leader_epoch` -- ``leader-epoch-checkpoint`` and the epoch cache
* :mod:`storage.offset_checkpoint` -- a broker log directory's four offset checkpoints
* :mod:`storage.partition_metadata` -- ``partition.metadata``
* :mod:`storage.producer_snapshot` -- ``<offset>.snapshot`` producer-state files
* :mod:`storage.log` -- the segmented ``__cluster_metadata-0`` log: opening, epochs, appends
* :mod:`storage.segmented_log` -- its segment list: offsets, reads, truncation, flushing
* :mod:`storage.log_snapshots` -- its KRaft snapshots and their retention
* :mod:`storage.log_loader` -- its recovery when opened (``LogLoader``)
* :mod:`storage.quorum_state` -- ``quorum-state``
* :mod:`storage.snapshots` -- ``<offset>-<epoch>.checkpoint`` KRaft snapshots
* :mod:`storage.snapshot_format` -- a snapshot's id and contents from and to bytes (no file I/O)
* :mod:`storage.meta_properties` -- ``meta.properties``
* :mod:`storage.bootstrap` -- ``bootstrap.checkpoint``
* :mod:`storage.format` -- what ``kafka-storage format`` writes
* :mod:`storage.fileio` -- fsync, atomic replace, the data-directory lock
* :mod:`storage.errors` -- the exceptions raised by all of the above
"""
