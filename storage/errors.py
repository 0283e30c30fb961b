"""Exceptions raised by the storage package, named after the Kafka exceptions they mirror.

Two families matter to callers:

* :class:`KafkaStorageError` -- an I/O operation on the log directory failed (write, fsync,
  rename, truncate). The node must stop and never acknowledge anything after it (Kafka marks the
  metadata log directory offline and shuts down, ``ReplicaManager.scala``; a failed fsync may have
  dropped dirty pages, so retrying proves nothing).
* :class:`CorruptRecordError` / :class:`InvalidRecordError` -- bytes that are not a valid record
  batch. They derive from :class:`kwire.wire.DecodeError` so callers that handle malformed input
  generically keep working.
"""

from __future__ import annotations

from kwire.wire import DecodeError


class StorageError(Exception):
    """Base of the non-decoding storage errors."""


class KafkaStorageError(StorageError):
    """An I/O failure on the log directory (Kafka's ``KafkaStorageException``).

    Raised for every failed write, fsync, truncate, rename or directory fsync. The original
    ``OSError`` is chained as ``__cause__``. After this the log object is unusable."""


class CorruptRecordError(DecodeError):
    """A batch whose framing or CRC is wrong (Kafka's ``CorruptRecordException``)."""


class InvalidRecordError(DecodeError):
    """A batch with a valid CRC whose content breaks the format (``InvalidRecordException``)."""


class UnexpectedAppendOffsetError(StorageError):
    """An append whose first offset is not the log end offset
    (``UnexpectedAppendOffsetException``)."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or above the log end offset
    (``OffsetOutOfRangeException``)."""


class RecordTooLargeError(StorageError):
    """A batch larger than the configured maximum (``RecordBatchTooLargeException``)."""


class LogDirectoryLockedError(StorageError):
    """Another process holds the data directory's ``.lock``."""


class InconsistentStateError(StorageError):
    """Files in a directory contradict each other (e.g. a log start offset with no snapshot
    covering it, ``KafkaMetadataLog.recoverSnapshots``)."""


class FormatError(StorageError):
    """A directory is unformatted, already formatted, or formatted for another cluster/node
    (the ``kafka-storage`` and ``MetaPropertiesEnsemble`` verification errors)."""
