"""Precedents: the issues the comment leads with, one line each, at most three.

First the repository's own issues (the repository memory's `related`) that share the issue's error signature or
pass the related floor, each with how it ended; then labelled cases of the pack, only where they share a
signature or pass the similarity floor. A labelled case whose symptom contradicts the engine's reading of the
symptom is left out unless it shares the error: it is more often unrelated than not, and two lines that disagree
cost the reader more than one.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.comment.links import case_link, repo_of, same_repo
from bot.comment.markdown import code_span, escape_markdown
from bot.domain import Neighbour, RelatedIssue
from bot.taxonomy import Taxonomy

MAX_PRECEDENTS = 3


@dataclass(frozen=True)
class Precedent:
    """One line of the comment's lead, and what it stands for (metrics and backed rows read these)."""

    case_id: str  # "owner/repo#N"
    link: str  # markdown: `#N` in the issue's own repository, a non-pinging link elsewhere
    how: str  # how it ended, in words
    signature: str | None = None  # the error it shares with the issue
    own: bool = False  # an issue of the repository the comment is posted on
    labels: tuple[tuple[str, str], ...] = ()  # a pack case's gold labels (axis, id)
    title: str | None = None
    score: float | None = None  # cosine to the issue

    def label(self, axis: str) -> str | None:
        return dict(self.labels).get(axis)


def select_precedents(related: list[RelatedIssue], neighbours: list[Neighbour], taxonomy: Taxonomy, *,
                      own_repo: str | None, own_number: int | None, related_floor: float, similarity_floor: float,
                      symptom: str | None) -> list[Precedent]:
    """At most three: the repository's own issues first, then labelled cases (signature-sharing ones first)."""
    chosen: list[Precedent] = []
    seen: set[str] = set()
    own = sorted((r for r in related if r.signature or r.score >= related_floor),
                 key=lambda r: (r.signature is None, -r.score))
    for r in own:
        case_id = f"{r.repo}#{r.number}".lower()
        if own_repo and not same_repo(r.repo, own_repo):
            continue  # the memory is private to its repository: never cite another's issues as `#N`
        if (r.number == own_number and same_repo(r.repo, own_repo)) or case_id in seen:
            continue
        seen.add(case_id)
        chosen.append(_from_related(r))
    cases = sorted((n for n in neighbours if n.signature or n.score >= similarity_floor),
                   key=lambda n: (n.signature is None, -n.score))
    for n in cases:
        if len(chosen) >= MAX_PRECEDENTS:
            break
        gold = n.labels.get("symptom")
        if not n.signature and symptom and gold and gold != symptom:
            continue
        precedent = _from_neighbour(n, taxonomy, own_repo)
        if precedent is None or precedent.case_id.lower() in seen:
            continue
        seen.add(precedent.case_id.lower())
        chosen.append(precedent)
    return chosen[:MAX_PRECEDENTS]


def _from_related(r: RelatedIssue) -> Precedent:
    return Precedent(case_id=f"{r.repo}#{r.number}", link=f"#{r.number}", how=how_it_ended(r),
                     signature=r.signature, own=True, title=r.title, score=r.score)


def how_it_ended(r: RelatedIssue) -> str:
    """"closed, fixed by #4290, released in v0.14.1", "open: possible duplicate", "closed as not planned"."""
    if r.type == "pull_request":
        return "pull request, merged" if r.state == "merged" else f"pull request, {r.state}"
    if r.state == "open":
        return "open: possible duplicate" if r.possible_duplicate or r.signature else "open"
    if r.state_reason == "duplicate" or r.duplicate_of:
        return f"closed as a duplicate of #{r.duplicate_of}" if r.duplicate_of else "closed as a duplicate"
    if r.state_reason == "not_planned":
        return "closed as not planned"
    if r.closed_by:
        by = r.closed_by if r.closed_by.startswith("#") else f"commit {r.closed_by[:12]}"
        released = f", released in {escape_markdown(r.released_in, 30)}" if r.released_in else ""
        return f"closed, fixed by {by}{released}"
    return "closed"


def _from_neighbour(n: Neighbour, taxonomy: Taxonomy, own_repo: str | None) -> Precedent | None:
    link = case_link(n.id, n.url, own_repo)
    if link is None:
        return None
    symptom, fix, kind = n.labels.get("symptom"), n.labels.get("fix_pattern"), n.labels.get("kind")
    failure = taxonomy.words("symptom", symptom) if symptom and symptom != "none" else None
    if failure is None and kind and kind != "bug_report":
        failure = f"a {taxonomy.words('kind', kind)}"  # a similar question or request: say which
    if n.is_pull_request:
        how = f"pull request fixing {failure}" if failure else "fix pull request"
    else:
        resolved = fix and fix != "none" and taxonomy.is_established("fix_pattern", fix)
        parts = [failure, f"resolved by {taxonomy.words('fix_pattern', fix)}" if resolved and fix else None]
        how = "; ".join(p for p in parts if p) or "labelled case"
    labels = tuple((axis, value) for axis, value in n.labels.items() if value)
    return Precedent(case_id=n.id, link=link, how=how, signature=n.signature,
                     own=same_repo(repo_of(n.id, n.url), own_repo), labels=labels, title=n.title, score=n.score)


def render_precedents(precedents: list[Precedent]) -> list[str]:
    """"**Seen before:**" and one line each: link, title when known, how it ended, the shared error."""
    if not precedents:
        return []
    lines = ["**Seen before:**"]
    quoted: set[str] = set()
    for p in precedents:
        title = f" {escape_markdown(p.title, 60)}" if p.title else ""
        same = ""
        if p.signature:  # the error itself once; later lines that share it just say so
            same = ", same error" + ("" if p.signature in quoted else f" {code_span(p.signature, 100)}")
            quoted.add(p.signature)
        lines.append(f"- {p.link}{title} ({p.how}){same}")
    return lines
