"""``make bench``: kwire's figures side by side with a reference, one section at a time.

``python -m tools.bench [SECTION...] [--json OUT] [--quick] [--runs N] [--min-time S] [--profile]``;
with no section every registered one runs. Benchmarks are not tests: nothing here asserts on
speed, and the figures of one run on a shared machine are only as good as the load average and
CPU share printed with them.

Adding a section is one module and one line in :mod:`tools.bench.registry`::

    # tools/bench/storage.py
    from tools.bench.core import Result, Settings, measure_pair

    def run(args) -> list[Result]:
        settings = Settings.from_args(args)          # honours --quick, --runs, --min-time
        k, r = measure_pair(kwire_op, reference_op, settings)   # interleaved runs
        return [Result(section="storage", what="...", unit="ops/s",
                       kwire=k.rate(), kwire_best=k.rate(best=True),
                       reference=r.rate(), reference_best=r.rate(best=True),
                       reference_name="...", conditions="exact conditions")]

A section that cannot produce honest figures (a precondition failed) raises
:class:`tools.bench.core.SectionError` with the reason; the runner reports it and exits 1.
Sections whose figures are not rates (latencies, seconds) set ``higher_is_better=False`` so that
the ratio still reads "> 1 means kwire is ahead".
"""
