"""This process's loggers as DescribeConfigs lists them for a BROKER_LOGGER resource
(``server.controller.describe_configs`` takes them injected: reading the logging registry is
the node's business, not the sans-IO controller's)."""

from __future__ import annotations

import logging

__all__ = ["python_logger_levels"]


def python_logger_levels() -> dict[str, str]:
    """Logger name (the root as "root") -> its effective level's Python name ("WARNING")."""
    levels = {"root": logging.getLevelName(logging.getLogger().getEffectiveLevel())}
    for name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger):
            levels[name] = logging.getLevelName(logger.getEffectiveLevel())
    return levels
