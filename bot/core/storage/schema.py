"""Creating tables in the service database, once, however many processes start together."""

from __future__ import annotations

from typing import Any

SCHEMA_LOCK = 7_340_001  # the advisory lock id under which every schema is created on PostgreSQL


def create_tables(run: Any, postgres: bool, ddl: str) -> None:
    """Run each `;`-separated statement of `ddl` in the caller's transaction `run`. On PostgreSQL the
    transaction first takes the schema lock: replicas starting together, one creates, the others wait."""
    if postgres:
        run("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
    for statement in ddl.split(";"):
        if statement.strip():
            run(statement)
