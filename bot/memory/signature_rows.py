"""The rows of `memory_signatures`: each remembered issue's error signatures (digest, kind, canonical text), so
that a new issue finds the repository's issues that failed the same way, whatever their wording."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bot.core.domain import ErrorSignature


def replace_signatures(run: Any, repo: str, number: int, signatures: Iterable[ErrorSignature]) -> None:
    """The issue's signatures become exactly these (an edit that drops the error drops its rows)."""
    run("DELETE FROM memory_signatures WHERE repo = ? AND number = ?", (repo, number))
    for s in {s.digest: s for s in signatures}.values():
        run("INSERT INTO memory_signatures (repo, number, digest, kind, text) VALUES (?, ?, ?, ?, ?)",
            (repo, number, s.digest, s.kind, s.text))


def stored_signatures(run: Any, repo: str, numbers: Sequence[int] | None = None
                      ) -> dict[int, tuple[ErrorSignature, ...]]:
    """The stored signatures of `repo`'s issues (of `numbers` only, when given), per issue number."""
    query = "SELECT number, kind, text, digest FROM memory_signatures WHERE repo = ?"
    if numbers is not None:
        query += f" AND number IN ({', '.join('?' * len(numbers))})"
    found: dict[int, list[ErrorSignature]] = {}
    for number, kind, text, digest in run(query + " ORDER BY number, kind, digest", (repo, *(numbers or ()))
                                          ).fetchall():
        found.setdefault(int(number), []).append(ErrorSignature(kind=kind, text=text, digest=digest))
    return {n: tuple(s) for n, s in found.items()}


def sharing_numbers(run: Any, repo: str, digests: Sequence[str], exclude: int | None = None,
                    before: float | None = None) -> list[int]:
    """The issues of `repo` (and of no other repository) showing a signature of `digests`, created before
    `before` when given; never `exclude`."""
    if not digests:
        return []
    rows = run("SELECT DISTINCT s.number FROM memory_signatures s JOIN memory_issues i ON i.repo = s.repo "
               f"AND i.number = s.number WHERE s.repo = ? AND s.digest IN ({', '.join('?' * len(digests))}) "
               "AND s.number <> ? AND i.created_at < ? ORDER BY s.number",
               (repo, *digests, -1 if exclude is None else exclude,
                float("inf") if before is None else before)).fetchall()
    return [int(r[0]) for r in rows]
