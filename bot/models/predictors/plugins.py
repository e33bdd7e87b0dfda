"""Predictors from other packages: anything registered in the `ddl_triage.predictors` entry-point group.

A researcher's package declares, in its pyproject.toml,

    [project.entry-points."ddl_triage.predictors"]
    my-predictor = "my_package:make"        # make(settings) -> a bot.models.predictors.Predictor

and, once installed, `my-predictor` is a predictor name like the built-in ones (the CLI, the bot, and
`python -m eval run --predictors my-predictor`). See examples/predictor-plugin/.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "ddl_triage.predictors"
log = logging.getLogger(__name__)


def load_plugins(registry: dict[str, Any], register: Callable[[str], Callable[[Any], Any]]) -> dict[str, str]:
    """Register every installed plugin not already known; a plugin that fails to load is skipped, and the
    reason is returned by name (a broken third-party package must not take the bot down)."""
    problems: dict[str, str] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in registry:
            continue
        try:
            factory = point.load()
        except Exception as exc:  # any import error of someone else's package
            problems[point.name] = f"entry point {point.value!r} failed to load: {type(exc).__name__}: {exc}"
            log.warning("predictor plugin %s: %s", point.name, problems[point.name])
            continue
        if not callable(factory):
            problems[point.name] = f"entry point {point.value!r} is not callable (it must be make(settings))"
            continue
        register(point.name)(factory)
    return problems
