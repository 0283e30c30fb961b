"""Command-line entry points: the ``kwire`` console script (:mod:`tools.cli`) and its
subcommands, one module each, imported only when that subcommand runs."""
