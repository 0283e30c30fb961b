"""``make bench``: kwire's figures side by side with a reference, one section at a time.

``python -m tools.bench [SECTION...] [--json OUT] [--quick]``; sections are listed in
:mod:`tools.bench.registry`, the shared timing and table code is in :mod:`tools.bench.core`.
Benchmarks are not tests: nothing here asserts on speed.
"""
