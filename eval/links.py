"""Cross-references between records, so that linked threads share a fold.

A fix pull request and the issue it fixes, the same change opened against two branches, a thread quoting
another by `#N` or by URL, and threads with the same title are one discussion seen twice: if one of them
trains the model and the other tests it, the test is not held out. Near-duplicate grouping by embedding
similarity misses them (a PR's text differs from its issue's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.domain import Case

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
