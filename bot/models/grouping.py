"""Records that belong together: linked threads (a fix PR and its issue, `#N`/URL references, the same title) and
near-duplicate texts. Cross-validation keeps each group in one fold, both in `eval/` and in the engine's own
calibration, so that no copy of a held-out record teaches the model that predicts it.

A fix pull request and the issue it fixes, the same change opened against two branches, a thread quoting
another by `#N` or by URL, and threads with the same title are one discussion seen twice: if one of them
trains the model and the other tests it, the test is not held out. Near-duplicate grouping by embedding
similarity misses them (a PR's text differs from its issue's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from bot.core.domain import Case

NEAR_DUPLICATE_COSINE = 0.95


def near_duplicate_groups(vectors: np.ndarray, threshold: float = NEAR_DUPLICATE_COSINE,
                          links: Sequence[tuple[int, int]] = ()) -> list[list[int]]:
    """Connected groups of rows whose cosine similarity (unit-norm rows) reaches `threshold`, or that are linked.

    `links` are pairs of rows that belong together whatever their similarity (a fix PR and its issue).
    Transitive: if a ~ b and b ~ c, all three are one group. Groups are ordered by their first row.
    """
    n = len(vectors)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if n:
        sims = vectors @ vectors.T
        edges = [*zip(*np.nonzero(np.triu(sims >= threshold, k=1)), strict=True), *links]
        for i, j in edges:
            a, b = root(int(i)), root(int(j))
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def assign_folds(groups: Sequence[Sequence[int]], folds: int, seed: int) -> list[int]:
    """A fold per row: groups in a seeded random order, the larger first, each to the smallest fold."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, not {folds}")
    total = sum(len(g) for g in groups)
    if total < folds:
        raise ValueError(f"{total} records cannot fill {folds} folds")
    shuffled = [int(i) for i in np.random.default_rng(seed).permutation(len(groups))]
    order = sorted(shuffled, key=lambda i: -len(groups[i]))  # stable: ties keep the seeded order
    sizes = [0] * folds
    fold_of = [0] * total
    for i in order:
        target = sizes.index(min(sizes))
        for row in groups[i]:
            fold_of[row] = target
        sizes[target] += len(groups[i])
    return fold_of


URL_REF = re.compile(r"github\.com/([\w.-]+)/([\w.-]+)/(?:issues|pull)/(\d+)", re.IGNORECASE)
REPO_REF = re.compile(r"(?<![\w/.-])([\w.-]+)/([\w.-]+)#(\d+)\b")
SHORT_REF = re.compile(r"(?<![\w/#&])#(\d+)\b")
MIN_TITLE_CHARS = 12  # "Bug" or "Question" are not the same thread
Key = tuple[str, int]  # (repository name without owner, lower-case; number): survives an org rename


def thread_key(case: Case) -> Key | None:
    """The (repository, number) a record is, from its `repo`/`number`, else from its id `owner/name#N`."""
    if case.repo and case.number is not None:
        return case.repo.split("/")[-1].lower(), int(case.number)
    match = re.fullmatch(r"[\w.-]+/([\w.-]+)#(\d+)", case.id)
    return (match.group(1).lower(), int(match.group(2))) if match else None


def references(case: Case) -> set[Key]:
    """Threads a record's title and body point at: URLs, `owner/name#N` and, in its own repository, `#N`."""
    text = f"{case.title}\n{case.body}"
    found: set[Key] = {(name.lower(), int(n)) for _, name, n in URL_REF.findall(text)}
    found |= {(name.lower(), int(n)) for _, name, n in REPO_REF.findall(text)}
    own = thread_key(case)
    if own is not None:
        found |= {(own[0], int(n)) for n in SHORT_REF.findall(text)}
        found.discard(own)
    return found


def title_key(case: Case) -> str | None:
    title = " ".join(re.sub(r"[^\w\s]", " ", case.title.lower()).split())
    return title if len(title) >= MIN_TITLE_CHARS else None


def linked_pairs(cases: Sequence[Case]) -> list[tuple[int, int]]:
    """Index pairs of records that reference each other (either way) or share a title."""
    by_key: dict[Key, int] = {}
    for i, case in enumerate(cases):
        key = thread_key(case)
        if key is not None:
            by_key.setdefault(key, i)
    pairs: set[tuple[int, int]] = set()
    for i, case in enumerate(cases):
        for ref in references(case):
            j = by_key.get(ref)
            if j is not None and j != i:
                pairs.add((min(i, j), max(i, j)))
    first_with_title: dict[str, int] = {}
    for i, case in enumerate(cases):
        title = title_key(case)
        if title is None:
            continue
        j = first_with_title.setdefault(title, i)
        if j != i:
            pairs.add((j, i))
    return sorted(pairs)
