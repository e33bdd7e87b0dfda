"""The comment a maintainer reads, composed from a triage result: precedent first, one next step, at most two
asks, a line of surer labels, or silence.

Order of what maintainers asked for: the repository's own precedent (and labelled cases that share the error
or are close), one specific next step read from the error (the first diagnosis; the LLM's reading when one is
configured), the facts the likely failure needs and the text lacks, then the labels in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bot.comment.markdown import FOOTER, escape_markdown, marker
from bot.comment.policy import CommentPolicy, Substance, should_comment
from bot.comment.precedents import Precedent, render_precedents, select_precedents
from bot.comment.reading import write_reading
from bot.comment.rows import Row, render_rows, select_rows
from bot.domain import Diagnosis, EnvironmentFacts, Issue, TriageResult
from bot.facts import MAX_ASKED, NEEDS_DETAILS_FACTS, fact_present, framework_of, missing_facts
from bot.llm.base import ChatModel
from bot.taxonomy import Taxonomy

NEEDS_DETAILS = "This report does not say enough yet for a suggestion. Please add:"
BARE_READING = 0.8  # a bare report's top symptom this sure chooses its asks (tests/test_comment.py)
ASK_MISSING = "**Please add:**"
NOTHING_TO_ADD = "No earlier issue or known error matches this report yet."
# Asks for the environment alone (`ds_report`, the versions): worth a line in a comment that says something else,
# never the reason to post one (maintainers judged a label plus "post your versions" noise).
ENVIRONMENT_ONLY = frozenset({"versions", "torch_version", "cuda_version", "framework_version"})


@dataclass(frozen=True)
class CommentPlan:
    """What the comment will say, before any markdown: the benchmarks measure this, the renderer prints it."""

    precedents: list[Precedent] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    reading: str | None = None  # what the error means: the diagnosis's, or the LLM's validated sentences
    rows: list[Row] = field(default_factory=list)
    asks: list[str] = field(default_factory=list)  # fact ids (taxonomy `facts:`)
    ask_texts: list[str] = field(default_factory=list)  # in the project's own words
    needs_details: bool = False
    repo_labels: list[tuple[str, float]] = field(default_factory=list)
    confident_symptom: bool = False  # a symptom the comment states and the policy trusts on its own

    @property
    def substance(self) -> Substance:
        return Substance(precedents=len(self.precedents), diagnoses=int(self.diagnosis is not None),
                         confident_symptom=self.confident_symptom,
                         asks=len([f for f in self.asks if f not in ENVIRONMENT_ONLY or self.needs_details]))

    @property
    def references(self) -> frozenset[str]:
        """The `#N` of this repository that the comment links (all an LLM reading may cite)."""
        return frozenset(p.link for p in self.precedents if p.link.startswith("#"))


def plan_comment(result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, issue: Issue | None = None
                 ) -> CommentPlan:
    """Choose what to say. Without the issue (its text and repository) the engine's own asks are used."""
    own_repo = issue.repo if issue else next((r.repo for r in result.related), None)
    precedents = select_precedents(result.related, result.neighbours, taxonomy, own_repo=own_repo,
                                   own_number=issue.number if issue else None, related_floor=policy.related_floor,
                                   similarity_floor=policy.similarity_floor, symptom=_symptom_reading(result))
    diagnosis = result.diagnoses[0] if result.diagnoses and not result.needs_details else None
    if issue is not None:
        asks = missing_facts(issue, result.environment, taxonomy, result.label("kind"), _asked_symptom(result),
                             diagnoses=result.diagnoses, needs_details=result.needs_details)
    else:  # the engine's own asks (a bare report has none there: it gets the two a bare report needs)
        asks = list(NEEDS_DETAILS_FACTS) if result.needs_details else result.missing_facts[:MAX_ASKED]
    if diagnosis is not None:  # what the next step already tells them to run and post is not asked twice
        asks = [f for f in asks if not fact_present(taxonomy.fact(f), diagnosis.next_step, EnvironmentFacts())]
    framework = framework_of(issue, result.environment) if issue else result.environment.framework
    if result.needs_details:  # a bare report: the asks alone, no guesses
        precedents, rows = [], []
    else:
        rows = select_rows(result, taxonomy, policy.axes, precedents, diagnosis)
    symptom = result.predictions["symptom"]
    confident = any(row.axis == "symptom" for row in rows) and (
        symptom.corrected or symptom.confidence >= policy.confident_symptom)
    return CommentPlan(precedents=precedents, diagnosis=diagnosis, reading=diagnosis.reading if diagnosis else None,
                       rows=rows, asks=asks, ask_texts=[taxonomy.fact(f).ask_for(framework) for f in asks],
                       needs_details=result.needs_details, repo_labels=result.repo_labels,
                       confident_symptom=confident)


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
                    *, author_association: str | None = None, chat: ChatModel | None = None) -> str | None:
    """The markdown to post for `issue`, or None when the bot should stay silent.

    `author_association` is GitHub's field of the issue's author (OWNER, MEMBER, COLLABORATOR, ...); `chat`, when
    an LLM is configured, rewrites the reading of the error (validated; the diagnosis's text stands otherwise).
    """
    return compose(issue, result, taxonomy, policy or CommentPolicy(), author_association=author_association,
                   chat=chat)[1]


def compose(issue: Issue, result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, *,
            author_association: str | None = None, chat: ChatModel | None = None) -> tuple[CommentPlan, str | None]:
    """The plan and the markdown (None: silent); the benchmarks read the plan, the bot posts the markdown."""
    plan = plan_comment(result, taxonomy, policy, issue)
    if not should_comment(plan.substance, policy, author_association):
        return plan, None
    if chat is not None and (plan.diagnosis or plan.precedents):
        reading = write_reading(chat, issue, render_precedents(plan.precedents),
                                [plan.diagnosis] if plan.diagnosis else [], plan.references)
        if reading:
            plan = replace(plan, reading=reading)
    return plan, render_plan(plan, result, taxonomy)


def render_plan(plan: CommentPlan, result: TriageResult, taxonomy: Taxonomy) -> str:
    """Markdown: the hidden marker, then the precedents, the next step, the labels, the asks, the footer."""
    blocks: list[list[str]] = [render_precedents(plan.precedents), _next_step(plan),
                               render_rows(plan.rows, taxonomy), _asks(plan)]
    if plan.repo_labels:
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
