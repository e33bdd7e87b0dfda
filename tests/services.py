"""Tests that need a service of the machine (PostgreSQL's server binaries, a tmpfs mount): skipped where it is
missing on a developer's machine, a failure in CI, where a skip would hide that the test never ran."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE = "DDL_TRIAGE_REQUIRE_SERVICES"


def services_required() -> bool:
    """True in CI: DDL_TRIAGE_REQUIRE_SERVICES=1 (set by .ci/run), or CI=true (set by GitHub Actions and most CI
    systems) unless DDL_TRIAGE_REQUIRE_SERVICES=0 says otherwise."""
    value = os.environ.get(REQUIRE, "").strip().lower()
    if value:
        return value in {"1", "true", "yes"}
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_service(what: str, how: str) -> NoReturn:
    """Skip (locally) or fail (in CI) a test whose service is missing: `what` is missing, `how` installs it."""
    if services_required():
        pytest.fail(f"{what}; {how} ({REQUIRE}=1 or CI=true: a missing service fails instead of skipping)",
                    pytrace=False)
    pytest.skip(f"{what}; {how} (in CI, with {REQUIRE}=1 or CI=true, this fails instead)")
