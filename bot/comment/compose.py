"""The comment a maintainer reads, composed from a triage result: precedent first, one next step, at most one
ask, or silence.

Order of what maintainers asked for: the repository's own precedent (and labelled cases that share the error),
or for a question the same question answered before; one specific next step read from the error (the first
diagnosis, or its follow-up when the post shows the step done, or a later diagnosis of the same failure when the
first only localises it; the LLM's reading when one is configured); the fact the next step needs and the text
lacks. The labels in words only where the repository asks for them
(`comment_labels: true`): labels are for routing, in GitHub labels and the hidden marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from bot.comment.links import linked_in, number_in_repo
from bot.comment.markdown import FOOTER, escape_markdown, marker
from bot.comment.policy import CommentPolicy, Substance, should_comment
from bot.comment.precedents import (
    Precedent,
    Scope,
    render_asked_before,
    render_precedents,
    select_asked_before,
    select_precedents,
)
from bot.comment.reading import write_reading
from bot.comment.rows import Row, render_rows, select_rows
from bot.core.domain import Diagnosis, EnvironmentFacts, Issue, TriageResult
from bot.knowledge.facts import (
    MAX_ASKED,
    NEEDS_DETAILS_FACTS,
    NON_BUG_KINDS,
    analyses_cause,
    asks_to_show,
    fact_present,
    framework_of,
    missing_facts,
    proposes_own_fix,
)
from bot.knowledge.taxonomy import Taxonomy
from bot.models.llm.base import ChatModel
from bot.reading.normalise import NormalisedIssue
from bot.reading.signatures import tells_mechanism

NEEDS_DETAILS = "This report does not say enough yet for a suggestion. Please add:"
CODE_SPAN = re.compile(r"`([^`\n]+)`")
BARE_READING = 0.8  # a bare report's top symptom this sure chooses its asks (tests/test_comment.py)
ASK_MISSING = "**Please add:**"
NOTHING_TO_ADD = "No earlier issue or known error matches this report yet."


@dataclass(frozen=True)
class CommentPlan:
    """What the comment will say, before any markdown: the benchmarks measure this, the renderer prints it, the
    service stores its `reasons`."""

    precedents: list[Precedent] = field(default_factory=list)
    diagnosis: Diagnosis | None = None  # the one shown; its `next_step` is the follow-up when the post did the step
    reading: str | None = None  # what the error means: the diagnosis's, or the LLM's validated sentences
    rows: list[Row] = field(default_factory=list)
    asks: list[str] = field(default_factory=list)  # fact ids (taxonomy `facts:`)
    ask_texts: list[str] = field(default_factory=list)  # in the project's own words
    needs_details: bool = False
    repo_labels: list[tuple[str, float]] = field(default_factory=list)
    asked_before: list[Precedent] = field(default_factory=list)  # for a question: answered near-duplicates
    show_labels: bool = False  # the repository's `comment_labels`: the rows in words in the text

    @property
    def substance(self) -> Substance:
        # A playbook read from the title alone, or the usual first step of localising the error, rides along; only
        # a step read from what this post shows is a reason to speak.
        generic = self.diagnosis is not None and _generic(self.diagnosis)
        return Substance(next_step=self.diagnosis is not None and not generic, precedents=len(self.precedents),
                         asked_before=len(self.asked_before), labels=len(self.rows), asks=len(self.asks),
                         first_step=generic)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why it speaks (policy.REASONS); empty: it has nothing that moves the issue forward."""
        return self.substance.reasons

    @property
    def references(self) -> frozenset[str]:
        """The `#N` of this repository that the comment links (all an LLM reading may cite)."""
        return frozenset(p.link for p in [*self.precedents, *self.asked_before] if p.link.startswith("#"))


def plan_comment(result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, issue: Issue | None = None,
                 normalised: NormalisedIssue | None = None) -> CommentPlan:
    """Choose what to say. Without the issue (its text and repository) the engine's own asks are used; with the
    issue as the triage read it (`normalised`) its text is not read again."""
    own_repo = issue.repo if issue else next((r.repo for r in result.related), None)
    own_number = (issue.number or number_in_repo(issue.id, issue.url, own_repo)) if issue else None
    scope = Scope(own_repo=own_repo, own_number=own_number,
                  linked=linked_in(f"{issue.title}\n{issue.body}", own_repo) if issue else frozenset(),
                  opened=issue.created_at if issue else None)
    question = result.label("kind") in NON_BUG_KINDS
    diagnosis = None if result.needs_details else shown_diagnosis(result.diagnoses)
    if diagnosis is not None and issue is not None and _own_analysis(f"{issue.title}\n{issue.body}", question):
        diagnosis = None  # the reporter has the fix or the cause in hand: the step explains what they found
    precedents = select_precedents(result.related, result.neighbours, taxonomy, own_repo=own_repo,
                                   own_number=scope.own_number, related_floor=policy.related_floor,
                                   similarity_floor=policy.similarity_floor, symptom=_symptom_reading(result),
                                   scope=scope, allowed_symptoms=diagnosis.symptoms[:1] if diagnosis else (),
                                   telling={s.text for s in result.signatures if tells_mechanism(s)})
    asked_before: list[Precedent] = []
    if question:  # a question: the same question answered before; a failure's precedent only by its error
        asked_before = select_asked_before(result.related, question_floor=policy.question_floor, scope=scope)
        precedents = [p for p in precedents if p.signature and p.case_id not in {a.case_id for a in asked_before}]
    if issue is not None:
        asks = missing_facts(issue, result.environment, taxonomy, result.label("kind"), _asked_symptom(result),
                             diagnoses=result.diagnoses, needs_details=result.needs_details,
                             stage=result.label("stage"), report=normalised.report if normalised else None)
    else:  # the engine's own asks (a bare report has none there: it gets the two a bare report needs)
        asks = list(NEEDS_DETAILS_FACTS) if result.needs_details else result.missing_facts[:MAX_ASKED]
    if diagnosis is not None:  # what the next step already tells them to run and post is not asked twice
        asks = [f for f in asks if not fact_present(taxonomy.fact(f), diagnosis.next_step, EnvironmentFacts())]
    if not result.needs_details:  # beside a next step none; else one ask at most
        asks = asks_to_show(asks, [], next_step=diagnosis is not None)
    framework = framework_of(issue, result.environment) if issue else result.environment.framework
    if diagnosis is not None:  # nor what it asks for in the project's words (`ds_report` in the step and the ask)
        asks = [f for f in asks if not told_in_step(taxonomy.fact(f).ask_for(framework), diagnosis.next_step)]
    if result.needs_details:  # a bare report: the asks alone, no guesses
        precedents, asked_before, rows = [], [], []
    else:
        rows = select_rows(result, taxonomy, policy.axes, precedents, diagnosis)
    return CommentPlan(precedents=precedents, diagnosis=diagnosis, reading=diagnosis.reading if diagnosis else None,
                       rows=rows, asks=asks, ask_texts=[taxonomy.fact(f).ask_for(framework) for f in asks],
                       needs_details=result.needs_details, repo_labels=result.repo_labels,
                       asked_before=asked_before, show_labels=policy.comment_labels)


def _own_analysis(text: str, question: bool) -> bool:
    """The post brings its own fix, or (a failure, not a question about how the code works) its own reading of the
    cause in the framework's code: a diagnosis's step would tell the reporter what they wrote."""
    return proposes_own_fix(text) or (not question and analyses_cause(text))


def told_in_step(ask: str, step: str) -> bool:
    """Whether a next step already has them run and post what an ask names: every command the ask quotes
    (`ds_report`, `colossalai check -i`) is in the step."""
    commands = CODE_SPAN.findall(ask)
    return bool(commands) and all(command in step for command in commands)


def shown_diagnosis(diagnoses: list[Diagnosis]) -> Diagnosis | None:
    """The first diagnosis, with the step to show: its next step; when the post shows that step done, its
    follow-up (read from the post: no longer a generic step, though a title's playbook stays one); without a
    follow-up, none (prescribing what the reporter already did costs their trust). When that step only localises
    the error (or is a playbook read from the title), a later diagnosis of the same failure (a symptom in common)
    whose step names a mechanism is shown instead: the watchdog timeout of a job that "hangs at the first
    allreduce" is the hang at the first collective, and its step is the one to give."""
    if not diagnoses:
        return None
    first = _with_step(diagnoses[0])
    if first is None or not _generic(first):
        return first
    same_failure = (d for d in map(_with_step, diagnoses[1:])
                    if d is not None and not _generic(d) and set(d.symptoms) & set(first.symptoms))
    return next(same_failure, first)


def _with_step(diagnosis: Diagnosis) -> Diagnosis | None:
    """The diagnosis with the step to show: its own, its follow-up when the post did that, or None."""
    if not diagnosis.done:
        return diagnosis
    # The follow-up answers what the post shows done, so it is no generic first step. A playbook read from the title
    # alone stays one: its follow-up told reporters who had analysed their deadlock what they had done
    # (`python -m eval comments`, 2 comments).
    return (diagnosis.model_copy(update={"next_step": diagnosis.follow_up, "done": False, "localises": False})
            if diagnosis.follow_up else None)


def _generic(diagnosis: Diagnosis) -> bool:
    """A step that is no reason to speak on its own (CommentPlan.substance)."""
    return diagnosis.playbook or diagnosis.localises


def _asked_symptom(result: TriageResult) -> str | None:
    """The symptom whose facts are asked for: the label; on a bare report (labels withheld), the ranking's top
    when the title alone reads clearly (a bare "only 20 TFLOPS on 8 A100" is asked for its setup, not a
    traceback). It decides only what is asked, and is never shown."""
    prediction = result.predictions.get("symptom")
    if prediction is None or not result.needs_details:
        return result.label("symptom")
    top = prediction.top[0][0] if prediction.top else None
    return top if prediction.confidence >= BARE_READING else None  # the calibrated confidence of that top label


def _symptom_reading(result: TriageResult) -> str | None:
    """The engine's best reading of the symptom, shown or not: a labelled case that contradicts it is more often
    unrelated than not (`python -m eval comments`: 2 of 12 such links shared the gold symptom)."""
    prediction = result.predictions.get("symptom")
    if prediction is None:
        return None
    return prediction.label or (prediction.top[0][0] if prediction.top else None)


def compose_comment(issue: Issue, result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy | None = None,
                    *, author_association: str | None = None, chat: ChatModel | None = None,
                    normalised: NormalisedIssue | None = None) -> str | None:
    """The markdown to post for `issue`, or None when the bot should stay silent.

    `author_association` is GitHub's field of the issue's author (OWNER, MEMBER, COLLABORATOR, ...); `chat`, when
    an LLM is configured, rewrites the reading of the error (validated; the diagnosis's text stands otherwise);
    `normalised`, the issue as the triage read it, is not read again.
    """
    return compose(issue, result, taxonomy, policy or CommentPolicy(), author_association=author_association,
                   chat=chat, normalised=normalised)[1]


def compose(issue: Issue, result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, *,
            author_association: str | None = None, chat: ChatModel | None = None,
            normalised: NormalisedIssue | None = None) -> tuple[CommentPlan, str | None]:
    """The plan and the markdown (None: silent); the benchmarks read the plan, the bot posts the markdown.
    `normalised` is the issue as the triage read it (`Engine.read_and_triage`), so it is not read again."""
    plan = plan_comment(result, taxonomy, policy, issue, normalised)
    if not should_comment(plan.substance, policy, author_association):
        return plan, None
    if chat is not None and plan.reasons:
        reading = write_reading(chat, issue, render_precedents(plan.precedents),
                                [plan.diagnosis] if plan.diagnosis else [], plan.references, normalised)
        if reading:
            plan = replace(plan, reading=reading)
    return plan, render_plan(plan, result, taxonomy)


def render_plan(plan: CommentPlan, result: TriageResult, taxonomy: Taxonomy) -> str:
    """Markdown: the hidden marker, then the precedents, the next step, the labels (where the repository asks
    for them in words), the asks, the footer."""
    blocks: list[list[str]] = [render_asked_before(plan.asked_before), render_precedents(plan.precedents),
                               _next_step(plan), render_rows(plan.rows, taxonomy) if plan.show_labels else [],
                               _asks(plan)]
    if plan.repo_labels and plan.show_labels:
        blocks.append(["Labels this repository uses for issues like this: " + ", ".join(
            f"`{escape_markdown(name, 40)}`" for name, _ in plan.repo_labels)])
    body = [line for block in blocks if block for line in block]
    if not body:
        body = [NOTHING_TO_ADD]
    return "\n".join([marker(result), *body, FOOTER]) + "\n"


def _next_step(plan: CommentPlan) -> list[str]:
    if plan.diagnosis:
        return [f"**Next step:** {plan.reading} {plan.diagnosis.next_step}".strip()]
    return [f"**Reading:** {plan.reading}"] if plan.reading else []


def _asks(plan: CommentPlan) -> list[str]:
    if not plan.ask_texts:
        return []
    return [NEEDS_DETAILS if plan.needs_details else ASK_MISSING, *[f"- [ ] {text}" for text in plan.ask_texts]]
