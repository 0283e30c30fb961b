"""Faults injected into real processes -- kwire nodes and stock Kafka JVMs alike -- for the fault
tests (``compat/test_*_faults.py``).

* :mod:`compat.faults.disk`: a metadata log directory on a size-limited tmpfs (a full disk:
  ENOSPC), and fsync/fdatasync failing with EIO or slow (``fsync_fault.c``, loaded with
  ``LD_PRELOAD``).

Mounting needs root (these tests run as root on the test machines); every mount is made under
the test's temporary directory and removed when the test ends.
"""
