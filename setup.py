"""The one compiled module, ``storage._crecords`` (the commit path's per-record loops). It is
optional: where it cannot be built, the pure-Python readers and writers it mirrors run instead
(``storage.record_loops.COMPILED`` says which)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("storage._crecords", ["storage/_crecords.c"], optional=True)])
