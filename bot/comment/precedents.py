"""Precedents: the issues the comment leads with, one line each, at most three; and, for a question, the same
question asked and answered before.

Only issues of the same mechanism, opened before this one, that the post does not already link: first the
repository's own issues (the repository memory's `related`) that share the issue's error signature or pass the
related floor, then labelled cases of the pack that share its signature or pass the similarity floor. A case of
another repository only when it shares the error signature exactly (the same words in another project are more
often another mechanism: a DeepSpeed op build cited on a Colossal-AI build failure). Each is shown with how it
ended; one that did not end (open, or a case without an established fix) only as a possible duplicate sharing the
signature. A labelled case whose symptom contradicts the engine's reading, or the diagnosis shown, is left out
unless it shares the error: two lines that disagree cost the reader more than one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from bot.comment.links import case_link, repo_of, same_repo
from bot.comment.markdown import code_span, escape_markdown
from bot.core.domain import Neighbour, RelatedIssue
from bot.knowledge.taxonomy import Taxonomy

MAX_PRECEDENTS = 3
POSSIBLE_DUPLICATE = "open: possible duplicate"
UNRESOLVED_FIXES = (None, "", "none", "unresolved")
# A build's mechanism is its first compiler error, and build logs read alike whatever failed (pip's lines, the
# compiler's flags): for a build failure, only an issue that shares the error itself (or a near-copy the memory
# calls a possible duplicate) is a precedent, never one that is merely close.
SIGNATURE_ONLY_SYMPTOMS = frozenset({"installation_build_failure"})
Shared = TypeVar("Shared", Neighbour, RelatedIssue)  # a case that may share an error signature with the issue


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
    created_at: datetime | None = None  # when it was opened, where known

    def label(self, axis: str) -> str | None:
        return dict(self.labels).get(axis)


@dataclass(frozen=True)
class Scope:
    """What every precedent must respect: the issue itself, what its post links, when it was opened."""

    own_repo: str | None = None
    own_number: int | None = None
    linked: frozenset[str] = frozenset()  # `owner/repo#n`, lower-case (links.linked_in)
    opened: datetime | None = None  # the issue's created_at: nothing opened at or after it is a precedent

    def excludes(self, case_id: str, created_at: datetime | None) -> bool:
        """The issue itself, a link its post gives, or one opened at or after it: by its date, or, in the same
        repository, by its number (GitHub numbers a repository's issues and pull requests in the order opened)."""
        own = f"{self.own_repo}#{self.own_number}".lower() if self.own_repo and self.own_number else None
        later = bool(self.opened and created_at and created_at >= self.opened)
        repo, _, number = case_id.rpartition("#")
        if self.own_number is not None and same_repo(repo, self.own_repo) and number.isdigit():
            later = later or int(number) >= self.own_number
        return case_id.lower() == own or case_id.lower() in self.linked or later


def select_precedents(related: list[RelatedIssue], neighbours: list[Neighbour], taxonomy: Taxonomy, *,
                      own_repo: str | None, own_number: int | None, related_floor: float, similarity_floor: float,
                      symptom: str | None, scope: Scope | None = None, allowed_symptoms: Collection[str] = (),
                      telling: Collection[str] | None = None) -> list[Precedent]:
    """At most three: the repository's own issues first, then labelled cases (signature-sharing ones first).
    `allowed_symptoms` (the diagnosis shown) are the symptoms a labelled case may show without sharing the error;
    `telling` (when given) the issue's signatures that name its failure: a bare signal or exit code shared with a
    labelled case (SIGKILL ends an OOM kill as often as a crash), or a message that names only the symptom ("CUDA
    out of memory", a watchdog timeout), is not the same error."""
    scope = scope or Scope(own_repo=own_repo, own_number=own_number)
    if telling is not None:  # a shared signature that does not tell the mechanism counts as no shared signature
        neighbours, related = _telling_only(neighbours, telling), _telling_only(related, telling)
    chosen: list[Precedent] = []
    seen: set[str] = set()
    builds = symptom in SIGNATURE_ONLY_SYMPTOMS
    close = [r for r in related if r.signature or r.possible_duplicate or (r.score >= related_floor and not builds)]
    own = sorted(close, key=lambda r: (r.signature is None, -r.score))
    for r in own:
        case_id = f"{r.repo}#{r.number}"
        if own_repo and not same_repo(r.repo, own_repo):
            continue  # the memory is private to its repository: never cite another's issues as `#N`
        if scope.excludes(case_id, r.created_at) or case_id.lower() in seen or not _ended_or_duplicate(r):
            continue
        seen.add(case_id.lower())
        chosen.append(_from_related(r))
    cases = sorted((n for n in neighbours if n.signature or n.score >= similarity_floor),
                   key=lambda n: (n.signature is None, -n.score))
    for n in cases:
        if len(chosen) >= MAX_PRECEDENTS:
            break
        gold = n.labels.get("symptom")
        if not n.signature and (builds or gold in SIGNATURE_ONLY_SYMPTOMS):
            continue
        if not n.signature and gold and ((symptom and gold != symptom) or
                                         (allowed_symptoms and gold not in allowed_symptoms)):
            continue
        precedent = _from_neighbour(n, taxonomy, own_repo, contradicts=bool(allowed_symptoms) and gold is not None
                                    and gold not in allowed_symptoms, close=n.score >= similarity_floor)
        if precedent is None or precedent.case_id.lower() in seen or scope.excludes(precedent.case_id, n.created_at):
            continue
        if not precedent.own and not n.signature:
            continue  # another repository's case only when it shares the error signature exactly
        seen.add(precedent.case_id.lower())
        chosen.append(precedent)
    return chosen[:MAX_PRECEDENTS]


def _telling_only(items: list[Shared], telling: Collection[str]) -> list[Shared]:
    """The items, each keeping its shared signature only where that signature tells the failure."""
    return [i if i.signature is None or i.signature in telling else i.model_copy(update={"signature": None})
            for i in items]


def select_asked_before(related: list[RelatedIssue], *, question_floor: float, scope: Scope) -> list[Precedent]:
    """For a question: the repository's earlier questions this close, closed as completed (answered), at most one
    (the closest): "Asked before: #N (answered)"."""
    answered = sorted((r for r in related if r.type == "issue" and r.state == "closed"
                       and r.state_reason in (None, "completed") and not r.duplicate_of
                       and r.score >= question_floor and same_repo(r.repo, scope.own_repo)
                       and not scope.excludes(f"{r.repo}#{r.number}", r.created_at)), key=lambda r: -r.score)
    return [Precedent(case_id=f"{r.repo}#{r.number}", link=f"#{r.number}", how="answered", own=True, title=r.title,
                      score=r.score, created_at=r.created_at) for r in answered[:1]]


def _ended_or_duplicate(r: RelatedIssue) -> bool:
    """An issue that ended (closed, or a merged pull request), or an open one that is a possible duplicate: it
    shares the error, or the memory found it a near-copy (`possible_duplicate`, cosine >= 0.93); an open issue that
    shares only some words, or only a symptom-level error (an OOM, a watchdog timeout), is not shown."""
    if r.type == "pull_request":
        return r.state == "merged" or bool(r.signature)
    return r.state != "open" or bool(r.signature) or r.possible_duplicate


def _from_related(r: RelatedIssue) -> Precedent:
    return Precedent(case_id=f"{r.repo}#{r.number}", link=f"#{r.number}", how=how_it_ended(r),
                     signature=r.signature, own=True, title=r.title, score=r.score, created_at=r.created_at)


def how_it_ended(r: RelatedIssue) -> str:
    """"closed, fixed by #4290, released in v0.14.1", "open: possible duplicate", "closed as not planned"."""
    if r.type == "pull_request":
        return "pull request, merged" if r.state == "merged" else f"pull request, {r.state}"
    if r.state == "open":
        return POSSIBLE_DUPLICATE if r.possible_duplicate or r.signature else "open"
    if r.state_reason == "duplicate" or r.duplicate_of:
        return f"closed as a duplicate of #{r.duplicate_of}" if r.duplicate_of else "closed as a duplicate"
    if r.state_reason == "not_planned":
        return "closed as not planned"
    if r.closed_by:
        by = r.closed_by if r.closed_by.startswith("#") else f"commit {r.closed_by[:12]}"
        released = f", released in {escape_markdown(r.released_in, 30)}" if r.released_in else ""
        return f"closed, fixed by {by}{released}"
    return "closed as completed" if r.state_reason == "completed" else "closed"


def _from_neighbour(n: Neighbour, taxonomy: Taxonomy, own_repo: str | None, *, contradicts: bool = False,
                    close: bool = True) -> Precedent | None:
    link = case_link(n.id, n.url, own_repo)
    if link is None:
        return None
    symptom, fix, kind = n.labels.get("symptom"), n.labels.get("fix_pattern"), n.labels.get("kind")
    failure = taxonomy.words("symptom", symptom) if symptom and symptom != "none" and not contradicts else None
    if failure is None and kind and kind != "bug_report":
        failure = f"a {taxonomy.words('kind', kind)}"  # a similar question or request: say which
    resolved = fix not in UNRESOLVED_FIXES and taxonomy.is_established("fix_pattern", str(fix))
    if n.is_pull_request:
        # The pack knows when a pull request was opened, not when it merged (it may fix the failure only later), and
        # by similarity alone one was another mechanism (docs/knowledge-base.md, twelfth round): the same error only.
        if not n.signature:
            return None
        how = f"pull request fixing {failure}" if failure else "fix pull request"
    elif resolved and fix:
        how = "; ".join(p for p in (failure, f"resolved by {taxonomy.words('fix_pattern', fix)}") if p)
    elif kind and kind != "bug_report" and n.state == "closed":
        how = f"{failure}; answered" if failure else "answered"
    elif n.signature and close and same_repo(repo_of(n.id, n.url), own_repo):
        # not resolved: only as a possible duplicate, which only an issue of the same repository can be
        how = "; ".join(p for p in (failure, "not resolved: possible duplicate") if p)
    else:
        return None
    labels = tuple((axis, value) for axis, value in n.labels.items() if value)
    return Precedent(case_id=n.id, link=link, how=how, signature=n.signature,
                     own=same_repo(repo_of(n.id, n.url), own_repo), labels=labels, title=n.title, score=n.score,
                     created_at=n.created_at)


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


def render_asked_before(asked: list[Precedent]) -> list[str]:
    """"**Asked before:** #N title (answered)"."""
    return [f"**Asked before:** {p.link}" + (f" {escape_markdown(p.title, 80)}" if p.title else "") + f" ({p.how})"
            for p in asked]
