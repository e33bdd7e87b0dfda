"""When the bot speaks: a comment must add something beyond labels, or the bot stays silent.

The decision is a pure function of what the comment would say and of the repository's policy, so the
service, the Action, the CLI and the benchmarks decide alike. Labels and the stored decision do not depend on
it: silence only means no comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.settings import AXES, Settings

CommentMode = Literal["useful", "always", "never"]
# GitHub's author_association values of people who run the repository: they triage their own issues.
MEMBER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


class CommentPolicy(BaseModel):
    """A repository's choices about the comment (config `comment:`, `comment_on_members:`, `axes:`) and the
    floors that decide which precedents are close enough to show."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    comment: CommentMode = "useful"  # useful: only when it adds something; always; never
    comment_on_members: bool = False  # also comment on issues opened by the owner, members or collaborators
    axes: tuple[str, ...] = AXES  # the label rows the repository allows
    similarity_floor: float = 0.75  # a labelled case of the pack is shown at or above this cosine
    related_floor: float = 0.80  # an issue of the repository itself is shown at or above this cosine
    # A comment whose only substance is its symptom is posted when that symptom is at least this likely (the
    # calibrated confidence). 1.0, the default: never (calibrated confidences stay below 1): a comment that only
    # restates a label adds nothing a label does not say (read on 20 held-out threads, 2026-11-26).
    confident_symptom: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings, **choices: object) -> CommentPolicy:
        """The floors of the settings, with a repository's choices on top."""
        return cls.model_validate({"similarity_floor": settings.similarity_floor,
                                   "related_floor": settings.memory_related_floor, **choices})


@dataclass(frozen=True)
class Substance:
    """What a comment would say beyond labels: the inputs of the silence decision."""

    precedents: int = 0
    diagnoses: int = 0
    confident_symptom: bool = False
    asks: int = 0

    @property
    def adds_something(self) -> bool:
        return bool(self.precedents or self.diagnoses or self.confident_symptom or self.asks)


# Why the bot stayed silent: the outcome the service logs and stores with its decision.
SILENT_NEVER = "silent: the repository's config says comment: never"
SILENT_MEMBER = "silent: opened by a member"
SILENT_NOTHING = "silent: nothing to add"


def silence_reason(substance: Substance, policy: CommentPolicy, author_association: str | None = None) -> str | None:
    """Why the bot stays silent (one of the SILENT_ outcomes), or None when it posts: never when the policy says
    never; not on a member's issue unless the policy asks for it; otherwise always, or (the default) only when
    the comment adds something beyond labels."""
    if policy.comment == "never":
        return SILENT_NEVER
    if (author_association or "").upper() in MEMBER_ASSOCIATIONS and not policy.comment_on_members:
        return SILENT_MEMBER
    if policy.comment == "always" or substance.adds_something:
        return None
    return SILENT_NOTHING


def should_comment(substance: Substance, policy: CommentPolicy, author_association: str | None = None) -> bool:
    """Post (True) or stay silent: `silence_reason` has none."""
    return silence_reason(substance, policy, author_association) is None
