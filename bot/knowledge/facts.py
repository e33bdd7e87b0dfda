"""What a report still lacks: too little text to triage at all, or the facts its likely failure needs (taxonomy data).

Maintainers judged generic asks noise (the same torch / CUDA / framework versions on every issue, a launch
command for a pip build failure, DeepSpeed's `ds_report` on a Colossal-AI issue, a version the text already
gave in prose, `NCCL_DEBUG=INFO` asked of a report whose launch script sets it, the `ds_report` asked of one that
shows it as a screenshot under a "ds_report output" heading). So an ask is made only for a fact that the
recognised failure needs (a diagnosis's `ask`, the symptom's `ask_for`), that the text does not show (in prose,
code, configs, launch scripts, exports, or as a screenshot or collapsed block under a heading that names it), in
the project's own words; never a training setting of an inference issue, never the environment of a report that
compares two settings on one environment; and one at most, two only when both block the next step shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from bot.core.domain import Diagnosis, EnvironmentFacts, Issue
from bot.knowledge.taxonomy import Fact, Taxonomy
from bot.reading.normalise import (
    BOILERPLATE,
    HTML_COMMENT,
    MAX_INPUT_CHARS,
    REPO_FRAMEWORKS,
    NormalisedIssue,
    normalise,
)

MIN_WORDS = 12  # fewer words than this outside the title (after template boilerplate) cannot be triaged
MIN_CHARS = 300  # ... unless the body is longer than this anyway (code, a log)
MAX_ASKED = 2  # candidates; a comment shows one, two only when both block its next step (`asks_to_show`)
NON_BUG_KINDS = ("usage_question", "feature_request", "documentation")  # a short title can be enough for these
NEEDS_DETAILS_FACTS = ("traceback", "versions")  # what a bare bug report needs first
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*")
# Chinese, Japanese and Korean prose has no spaces between words: two of its characters count as one word, about
# the length of a word there (a post in Chinese was read as empty, and its error went unanswered).
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
CJK_CHARS_PER_WORD = 2
# A title that is an exception line ("ModuleNotFoundError: No module named 'x'") names the failure the body may only
# show the code of: the report is not bare.
_TITLE_ERROR = re.compile(r"^\s*(?:\[[^\]\n]{1,20}\]\s*:?\s*)*[A-Za-z_][\w.]*(?:Error|Exception)\s*:\s*\S")
# A section heading: markdown `#`, a bold line, or a short line ending with a colon ("ds_report output:").
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(.{2,80}?)|\*\*([^*\n]{2,80})\*\*:?|([^\n:]{2,60}):)\s*$")
# What stands for the fact under such a heading: a screenshot, an attached file, or a collapsed block.
_ATTACHMENT = re.compile(r"^\s*(?:!\[[^\]\n]*\]\(|<img\b|<details\b|<summary\b|https://github\.com/user-attachments/"
                         r"|\[[^\]\n]*\]\(https?://\S+\.(?:png|jpe?g|gif|webp|txt|log)\))", re.IGNORECASE)
_HEADING_REACH = 4  # lines after the heading (blank and template lines skipped) where the attachment may start
# An inference issue, from the title (the stage definition of taxonomy ddl-v1: DeepSpeed-Inference, kernel
# injection, FastGen / MII, serving, generation).
INFERENCE_TITLE = re.compile(r"\b(?:inference|init_inference|kernel[_ ]inject\w*|MII|FastGen|serv(?:e|ing)|"
                             r"generat(?:e|es|ion|ing)|text[-_ ]generation)\b", re.IGNORECASE)
# A report comparing two settings on one environment ("works with stage 2, fails with stage 3"): the installation
# is the same on both sides, so asking for it cannot separate them.
_WORKS = (r"(?:works?|working|worked|runs? fine|trains? (?:fine|well|normally)|converges?|succeed\w*|"
          r"(?:is |are )?(?:ok|okay|fine|normal))")
_FAILS = (r"(?:fails?|failed|failing|breaks?|broke|crash\w*|hangs?|hung|stuck|errors?|OOMs?|out of memory|"
          r"diverges?|nan|doesn'?t work|does not work|not work\w*|is wrong|are wrong|differ\w*)")
_CONTRAST = r"(?:but|however|whereas|while|yet|,|;|->|vs\.?|instead)"
COMPARISON = tuple(re.compile(p, re.IGNORECASE) for p in (
    rf"\b{_WORKS}\b[^\n.!?]{{0,100}}\b{_CONTRAST}[^\n.!?]{{0,100}}\b{_FAILS}\b",
    rf"\b{_FAILS}\b[^\n.!?]{{0,100}}\b{_CONTRAST}[^\n.!?]{{0,100}}\b{_WORKS}\b",
    rf"\b(?:with|when|using|under|on|if)\b[^\n.!?]{{1,60}}\b{_WORKS}\b[^\n]{{0,160}}\b(?:with|when|using|under|on|if)\b"
    rf"[^\n.!?]{{1,60}}\b{_FAILS}\b",
    rf"\b(?:with|when|using|under|on|if)\b[^\n.!?]{{1,60}}\b{_FAILS}\b[^\n]{{0,160}}\b(?:with|when|using|under|on|if)\b"
    rf"[^\n.!?]{{1,60}}\b{_WORKS}\b",
))


# The reporter already has the fix: a pull / merge request of theirs, or the change that fixes it named. A next step
# (how to localise the failure) is then what they did; prescribing it costs their trust (issue #21, item 4).
OWN_FIX = re.compile(
    r"\b(?:i(?:'ve| have)?|we(?:'ve| have)?)\s+(?:created|opened|submitted|sent|raised|filed|made|proposed|posted)\s+"
    r"(?:an?\s+|the\s+|two\s+|some\s+)?(?:draft\s+)?(?:PRs?|MRs?|pull\s+requests?|merge\s+requests?|(?:a\s+)?fix(?:es)?)\b|"
    r"\b(?:created|opened|submitted|raised)\s+(?:an?\s+)?(?:draft\s+)?(?:PRs?|MRs?|pull\s+requests?|merge\s+requests?)\s+"
    r"(?:to|that)\s+(?:\w{2,20}ly\s+)?(?:fix|prevent|address|solve|work\s*around)|"
    r"\b(?:my|our)\s+(?:draft\s+)?(?:PRs?|MRs?|pull\s+requests?|merge\s+requests?)\b|"
    r"\bfix(?:ed)?\s+(?:it\s+)?(?:in|by|with)\s+(?:my\s+|our\s+)?(?:PR|MR|pull\s+request|#\d{1,6}|"
    r"https://github\.com/[\w.-]{1,100}/[\w.-]{1,100}/pull/\d{1,7})|"
    # the change they applied, named: "this issue is fixed by removing ...", "I solved it by setting ..."
    r"\b(?:this|the)\s+(?:issue|problem|error|bug|crash|hang)\s+(?:is|was|gets|got|can\s+be)\s+(?:fixed|solved|resolved|"
    r"avoided|gone)\s+(?:by|after|when)\s+(?:I\s+|we\s+)?(?:remov|chang|sett?|add|replac|pass|patch|comment)\w*\b|"
    r"\b(?:i|we)\s+(?:fixed|solved|resolved|worked\s+around)\s+(?:it|this|the\s+(?:issue|problem|error|bug))\s+by\s+"
    r"(?:remov|chang|sett?|add|replac|pass|patch|comment)\w*\b", re.IGNORECASE)


# A section of the post that brings the change itself: "**Fix suggestions**", "## Proposed fix", "Suggested fix:".
OWN_FIX_SECTION = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?(?:fix[ \t]+suggestions?|suggested[ \t]+(?:fix|patch|change)(?:es|s)?|"
    r"proposed[ \t]+(?:fix|patch|change|solution)(?:es|s)?)[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE)


# What an unfilled section holds instead of a fix (Megatron-LM's regression template asks for a "**Proposed fix**").
_NO_FIX = re.compile(r"^\s*(?:n/?a|none|no|nope|not sure|unknown|tbd|\?+|-+|if you have a proposal\b.*|"
                     r"a clear and concise description\b.*)\s*\.?\s*$", re.IGNORECASE)
_SECTION_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*\n]+\*\*\s*:?\s*$)")


def proposes_own_fix(text: str) -> bool:
    """Whether the post says the reporter already made (or names) the change that fixes it, or brings it in a
    section of its own that they filled in."""
    text = text or ""
    if OWN_FIX.search(text):
        return True
    for section in OWN_FIX_SECTION.finditer(text):
        following = [line for line in text[section.end():].split("\n") if line.strip()]
        if following and not _SECTION_HEADING.match(following[0]) and not _NO_FIX.match(following[0]):
            return True
    return False


# The reporter already analysed the cause in the framework's code: the fault traced down to a call, "it turns out",
# the root cause named, a line that "should be removed". The failure is then one for a maintainer to read in that
# code, and the knowledge base's step for the error explains what they found themselves (twelfth round,
# docs/knowledge-base.md). A link to a source line alone is no analysis: reporters link the line that raised, and a
# known fix of that line is still the answer (DeepSpeed#5078's empty pipeline stages).
ANALYSED_CAUSE = re.compile(
    r"\b(?:traced?|tracked|narrowed)\s+(?:it|this|the\s+(?:leak|bug|problem|issue|error|hang|crash))\s+(?:down\s+)?to\b|"
    r"\bit\s+turns\s+out\b|"
    r"\b(?:the\s+)?root\s+cause\s+(?:is|was|lies)\b|"
    r"\bthe\s+(?:bug|problem|issue)\s+lies\s+in\b|"
    r"\b(?:should|must|needs?\s+to)\s+be\s+(?:removed|deleted|changed\s+to|replaced\s+(?:by|with))\b", re.IGNORECASE)


def analyses_cause(text: str) -> bool:
    """Whether the post already locates the cause in the framework's code (the fault traced to a call, the cause named,
    the line to change named)."""
    return ANALYSED_CAUSE.search(text or "") is not None


def needs_details(normalised: NormalisedIssue) -> bool:
    """An empty body, a bare title, or a template left unfilled: ask for the facts instead of guessing."""
    if normalised.signal or len(normalised.body) >= MIN_CHARS:  # an error line or a pasted log is something
        return False
    if _TITLE_ERROR.search(normalised.title):  # so is an error the title quotes
        return False
    words = len(_WORD.findall(normalised.body)) + len(_CJK.findall(normalised.body)) // CJK_CHARS_PER_WORD
    return words < MIN_WORDS


@cache
def _patterns(present: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in present)


def fact_present(fact: Fact, text: str, environment: EnvironmentFacts) -> bool:
    """The fact's own evidence: an extracted environment field, or one of its patterns in the text."""
    if any(getattr(environment, name, None) is not None for name in fact.environment):
        return True
    return any(p.search(text) for p in _patterns(fact.present))


def fact_shown(taxonomy: Taxonomy, fact: Fact, text: str, environment: EnvironmentFacts,
               framework: str | None, raw_body: str = "") -> bool:
    """The fact is there: its own evidence, a screenshot or collapsed block under a heading naming it in
    `raw_body` (the body as written: the normalised text drops template headings), or (a composite such as
    `versions`) every one of its parts."""
    if fact_present(fact, text, environment) or given_under_heading(fact, raw_body):
        return True
    parts = fact.parts(framework)
    return bool(parts) and all(fact_shown(taxonomy, taxonomy.fact(p), text, environment, framework, raw_body)
                               for p in parts)


def given_under_heading(fact: Fact, body: str) -> bool:
    """A section heading naming the fact ("### ds_report output", "**NCCL log**", "Launch script:") followed,
    before any other text, by a screenshot, an attached file or a collapsed <details> block."""
    if not fact.headings or not body:
        return False
    lines = HTML_COMMENT.sub("", body).replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        words = next(group for group in heading.groups() if group)
        if not any(p.search(words) for p in _patterns(fact.headings)):
            continue
        following = [n for n in lines[i + 1:i + 1 + _HEADING_REACH] if n.strip() and not BOILERPLATE.match(n)]
        if following and _ATTACHMENT.match(following[0]):
            return True
    return False


def compares_settings(text: str) -> bool:
    """Whether the report compares two settings on one environment (it works one way and fails the other)."""
    return any(p.search(text) for p in COMPARISON)


def reads_as_inference(title: str, stage: str | None) -> bool:
    """An inference issue: its stage (the label, or the diagnosis's), else a title that names inference."""
    return stage == "inference" or (stage in (None, "none") and bool(INFERENCE_TITLE.search(title or "")))


def asks_to_show(asks: Sequence[str], blocking: Sequence[str], *, next_step: bool = False) -> list[str]:
    """One ask; two only when both are in `blocking`. Beside a next step, none: the step is what the reporter
    does next, and five readings by maintainers (seeds 101 to 113) scored the asks that rode beside a step as
    boilerplate (`ds_report` on a leak, the launch command a post already holds)."""
    if next_step:
        return []
    if len(asks) > 1 and all(a in blocking for a in asks[:2]):
        return list(asks[:2])
    return list(asks[:1])


def report_text(issue: Issue) -> str:
    """What the reporter wrote: title and body without template boilerplate or unfilled sections (a template's
    "**ds_report output** Please run `ds_report`" left as it was is not a `ds_report`)."""
    normalised = normalise(issue, max_chars=MAX_INPUT_CHARS)
    return f"{normalised.title}\n{normalised.body}"


def framework_of(issue: Issue, environment: EnvironmentFacts) -> str | None:
    """The project the issue was filed on (its repository first: a Colossal-AI issue that mentions DeepSpeed
    is still asked in Colossal-AI's words), else the one its text names."""
    repo = (issue.repo or "").lower()
    by_repo = next((name for key, name in REPO_FRAMEWORKS.items() if key in repo), None)
    return by_repo or environment.framework


def missing_facts(issue: Issue, environment: EnvironmentFacts, taxonomy: Taxonomy, kind: str | None,
                  symptom: str | None, *, diagnoses: Sequence[Diagnosis] = (), needs_details: bool = False,
                  stage: str | None = None, report: str | None = None) -> list[str]:
    """Fact ids to ask for, at most two: what the likely failure needs (each diagnosis's `ask`, then the
    symptom's `ask_for`) and the text does not show.

    Nothing is asked of a question, a feature request or a documentation report, nor of a report whose kind
    is unsure unless a failure was recognised. A report with too little text is asked for the error and the
    versions; when `symptom` (there: what its title clearly reads as) is a failure without an error - low
    throughput, a loss that differs, a hang - it is asked for what that failure needs instead of a traceback
    it will never have. A training setting is not asked of an inference issue (`stage`, or its title), nor
    the environment of a report that compares two settings on one environment. `report` is the issue's
    `report_text`, where the triage has it (`NormalisedIssue.report`); else it is read here.
    """
    if needs_details:
        own = list(taxonomy.value("symptom", symptom).ask_for) if symptom and symptom != "none" else []
        wanted: list[str] = [*own, "versions"] if own and "traceback" not in own else list(NEEDS_DETAILS_FACTS)
    elif kind in NON_BUG_KINDS or not (kind == "bug_report" or diagnoses or (symptom and symptom != "none")):
        return []
    else:
        wanted = [d.ask for d in diagnoses if d.ask]
        wanted += list(taxonomy.value("symptom", symptom).ask_for) if symptom else []
        wanted = wanted or list(taxonomy.ask_for_any_bug)
    known = {f.id for f in taxonomy.facts}
    symptoms = {symptom, *(s for d in diagnoses for s in d.symptoms)} - {None}
    framework = framework_of(issue, environment)
    text = report if report is not None else report_text(issue)
    inference = reads_as_inference(issue.title, stage or next((d.stage for d in diagnoses if d.stage), None))
    comparison = compares_settings(text)
    chosen: list[str] = []
    for fact_id in dict.fromkeys(wanted):
        if fact_id not in known:
            continue  # a diagnosis naming a fact this taxonomy lacks asks nothing
        fact_id = _narrowed(taxonomy, taxonomy.fact(fact_id), text, environment, framework, issue.body)
        fact = taxonomy.fact(fact_id)
        if any(fact_id in taxonomy.fact(c).parts(framework) for c in chosen):
            continue  # `ds_report` already gives the DeepSpeed version
        if symptoms & set(fact.not_for) or not (needs_details or _wanted_here(fact, text)):
            continue
        if (inference and "inference" in fact.not_for_stages) or (comparison and fact.environment_only):
            continue
        if fact_shown(taxonomy, fact, text, environment, framework, issue.body):
            continue
        parts = [c for c in chosen if c in fact.parts(framework)]
        if parts:  # the project's own report replaces the one version asked for
            chosen[chosen.index(parts[0])] = fact_id
            chosen = list(dict.fromkeys(chosen))
        elif len(chosen) < MAX_ASKED:
            chosen.append(fact_id)
    return chosen


def _narrowed(taxonomy: Taxonomy, fact: Fact, text: str, environment: EnvironmentFacts, framework: str | None,
              raw_body: str = "") -> str:
    """A composite fact the text shows all but one part of: that one part ("the Transformer Engine version",
    not the commit the reporter already gave)."""
    parts = fact.parts(framework)
    missing = [p for p in parts
               if not fact_shown(taxonomy, taxonomy.fact(p), text, environment, framework, raw_body)]
    return missing[0] if parts and len(missing) == 1 and not fact_present(fact, text, environment) else fact.id


def _wanted_here(fact: Fact, text: str) -> bool:
    return not fact.asked_when or any(p.search(text) for p in _patterns(fact.asked_when))
