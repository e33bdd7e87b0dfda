"""When the bot speaks: only for a reason that moves the issue forward, or it stays silent.

A comment is posted only when it carries at least one reason to speak (REASONS): a next step read from the post
that the post does not show as already done, a precedent of the same mechanism, or, for a question, the same
question asked and answered before in the repository. Labels and asks ride along but never make a comment on
their own: maintainers judged a label line plus template asks worse than silence (2026-11-27, issue #21).

The decision is a pure function of what the comment would say and of the repository's policy, so the service,
the Action, the CLI and the benchmarks decide alike. Labels and the stored decision do not depend on it: silence
only means no comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.core.settings import AXES, Settings

CommentMode = Literal["useful", "always", "never"]
# GitHub's author_association values of people who run the repository: they triage their own issues.
MEMBER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# The reasons to speak, the only ones: what the comment tells a maintainer that a label does not.
NEXT_STEP = "next_step"  # a diagnosis of what the post shows, whose step the post does not show as done
PRECEDENT = "precedent"  # an earlier issue of the same mechanism (shared error signature, or the repository's own)
ASKED_BEFORE = "asked_before"  # for a question: a near-duplicate question of the repository, answered before
REASONS = (NEXT_STEP, PRECEDENT, ASKED_BEFORE)


class CommentPolicy(BaseModel):
    """A repository's choices about the comment (config `comment:`, `comment_on_members:`, `comment_labels:`,
    `axes:`) and the floors that decide which precedents are close enough to show."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    comment: CommentMode = "useful"  # useful: only for a reason to speak; always; never
    comment_on_members: bool = False  # also comment on issues opened by the owner, members or collaborators
    comment_labels: bool = False  # the labels in words ("**Likely:** ...") in the text; off: labels are for routing
    axes: tuple[str, ...] = AXES  # the label rows the repository allows
    similarity_floor: float = 0.80  # a labelled case of the pack is shown at or above this cosine
    related_floor: float = 0.80  # an issue of the repository itself is shown at or above this cosine
    # A closed question of the repository is "asked before" at or above this cosine (settings
    # memory_question_floor; `python -m eval floor --memory`, docs/as-opened.md).
    question_floor: float = 0.75

    @classmethod
    def from_settings(cls, settings: Settings, **choices: object) -> CommentPolicy:
        """The floors of the settings, with a repository's choices on top."""
        return cls.model_validate({"similarity_floor": settings.similarity_floor,
                                   "related_floor": settings.memory_related_floor,
                                   "question_floor": settings.memory_question_floor, **choices})


@dataclass(frozen=True)
class Substance:
    """What a comment would say: the reasons to speak, and what only rides along (labels, asks)."""

    next_step: bool = False
    precedents: int = 0
    asked_before: int = 0
    labels: int = 0  # label rows in words: never a reason
    asks: int = 0  # facts asked for: never a reason
    first_step: bool = False  # a diagnosis whose step is generic (it only localises, or a title's playbook): none

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the comment would be posted, in REASONS order (empty: nothing that moves the issue forward)."""
        held = {NEXT_STEP: self.next_step, PRECEDENT: self.precedents > 0, ASKED_BEFORE: self.asked_before > 0}
        return tuple(reason for reason in REASONS if held[reason])

    @property
    def adds_something(self) -> bool:
        return bool(self.reasons)


# Why the bot stayed silent: the outcome the service logs and stores with its decision.
SILENT_NEVER = "silent: the repository's config says comment: never"
SILENT_MEMBER = "silent: opened by a member"
SILENT_NOTHING = "silent: nothing to add"
# A diagnosis was read, but its step is generic: the usual first step of localising that error, the same whatever the
# post says, or a playbook read from the title alone. Withheld; the decision says so (the bot recognised something).
SILENT_FIRST_STEP = "silent: only a generic first step"


def silence_reason(substance: Substance, policy: CommentPolicy, author_association: str | None = None) -> str | None:
    """Why the bot stays silent (one of the SILENT_ outcomes), or None when it posts: never when the policy says
    never; not on a member's issue unless the policy asks for it; otherwise always, or (the default) only when
    the comment has a reason to speak (labels and asks alone are none)."""
    if policy.comment == "never":
        return SILENT_NEVER
    if (author_association or "").upper() in MEMBER_ASSOCIATIONS and not policy.comment_on_members:
        return SILENT_MEMBER
    if policy.comment == "always" or substance.adds_something:
        return None
    return SILENT_FIRST_STEP if substance.first_step else SILENT_NOTHING


def should_comment(substance: Substance, policy: CommentPolicy, author_association: str | None = None) -> bool:
    """Post (True) or stay silent: `silence_reason` has none."""
    return silence_reason(substance, policy, author_association) is None
