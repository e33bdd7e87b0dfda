from __future__ import annotations

from bot.comment import ASK_MISSING, NO_NEIGHBOURS, escape_markdown, has_marker, render_comment
from bot.domain import AxisPrediction, EnvironmentFacts, Neighbour, RelatedIssue, TriageResult
from bot.settings import AXES
from bot.taxonomy import Taxonomy


def _result(**overrides: object) -> TriageResult:
    preds = {axis: AxisPrediction(label=None, confidence=0.2, top=[("a", 0.3), ("b", 0.2), ("c", 0.1)])
             for axis in AXES}
    preds["symptom"] = AxisPrediction(label="hang_timeout", confidence=0.81,
                                      top=[("hang_timeout", 0.7), ("communication_error", 0.2), ("none", 0.1)])
    base: dict[str, object] = dict(
        issue_id="x", predictions=preds, environment=EnvironmentFacts(gpu="<img src=x onerror=alert(1)>"),
        neighbours=[Neighbour(id="o/r#1", url="https://github.com/o/r/issues/1", title="@admin [x](http://a.b)",
                              score=0.9, labels={"fix_pattern": "communication_tuning"}),
                    Neighbour(id="o/r#2", url="javascript:alert(1)", title="t", score=0.8)],
        predictor="default", taxonomy_version="ddl-v1", model_id="m")
    base.update(overrides)
    return TriageResult.model_validate(base)


def test_text_from_outside_is_escaped(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(), taxonomy)
    assert "<img" not in comment and "@admin" not in comment and "](http://a.b)" not in comment
    assert "javascript:" not in comment
    assert "`hang_timeout`" in comment and "81%" in comment
    assert comment.count("_not sure_") == 4


def test_fallback_is_shown_and_marker_found_again(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(fallback="openai:x: invalid answer twice"), taxonomy)
    assert has_marker(comment) and "not usable" in comment
    assert not has_marker("a person's comment mentioning ddl-triage")


def test_escape_markdown_is_one_inert_line() -> None:
    assert escape_markdown("a\nb *c* @d", 100) == "a b \\*c\\* @\u200bd"
    assert len(escape_markdown("x" * 500, 50)) == 50


def _with_kind(kind: str, confidence: float = 0.8) -> TriageResult:
    result = _result()
    result.predictions["kind"] = AxisPrediction(label=kind, confidence=confidence, top=[(kind, 0.9)])
    return result


def test_confidence_is_never_shown_as_certain_or_impossible(taxonomy: Taxonomy) -> None:
    result = _result()
    result.predictions["symptom"] = AxisPrediction(label="hang_timeout", confidence=0.9996,
                                                   top=[("hang_timeout", 0.99)])
    result.predictions["stage"] = AxisPrediction(label=None, confidence=0.0004, top=[("training", 0.2)])
    comment = render_comment(result, taxonomy)
    assert "100%" not in comment and "| 0% |" not in comment
    assert "99%" in comment and "| 1% |" in comment


def test_no_neighbour_below_the_floor_and_one_line_when_none_passes(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(), taxonomy, similarity_floor=0.85)
    assert "o/r#1" in comment and "similarity 0.80" not in comment
    nothing = render_comment(_result(), taxonomy, similarity_floor=0.95)
    assert "o/r#1" not in nothing and nothing.count(NO_NEIGHBOURS) == 1


def test_a_pull_request_is_listed_as_the_fix_never_as_a_similar_issue(taxonomy: Taxonomy) -> None:
    neighbours = [Neighbour(id="o/r#7", url="https://github.com/o/r/pull/7", type="pull_request", score=0.9,
                            labels={"symptom": "hang_timeout", "fix_pattern": "framework_patch"}),
                  Neighbour(id="o/r#3", url="https://github.com/o/r/issues/3", type="issue", score=0.88,
                            labels={"symptom": "hang_timeout", "fix_pattern": "unresolved"})]
    comment = render_comment(_result(neighbours=neighbours), taxonomy)
    assert "- pull request [o/r#7](https://github.com/o/r/pull/7)" in comment
    assert "fixed by pull request with `framework_patch`" in comment
    assert "- issue [o/r#3](https://github.com/o/r/issues/3)" in comment
    assert "issue [o/r#7]" not in comment


def test_an_issue_with_too_little_text_gets_the_needs_details_comment(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(needs_details=True), taxonomy)
    assert has_marker(comment) and "not have enough detail" in comment
    assert "| suggestion |" not in comment and "o/r#1" not in comment
    assert "traceback" in comment and "launch command" in comment


def test_questions_and_requests_get_a_short_comment_without_cause_or_fix(taxonomy: Taxonomy) -> None:
    for kind in ("usage_question", "feature_request"):
        comment = render_comment(_with_kind(kind, 0.8), taxonomy)
        assert f"`{kind}`" in comment and "o/r#1" in comment
        assert "Likely root cause" not in comment and "Likely fix pattern" not in comment
        assert "Symptom" not in comment and "Environment found" not in comment
    assert "Likely root cause" in render_comment(_with_kind("bug_report"), taxonomy)


def test_missing_facts_are_asked_for_in_one_checklist(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(missing_facts=["nccl_debug", "torch_version"]), taxonomy)
    assert comment.count(ASK_MISSING) == 1
    assert taxonomy.fact("nccl_debug").ask in comment and taxonomy.fact("torch_version").ask in comment
    assert taxonomy.fact("cuda_version").ask not in comment


def test_related_issues_of_the_repository_come_first_with_how_they_ended(taxonomy: Taxonomy) -> None:
    related = [RelatedIssue(repo="o/r", number=42, title="Same hang", state="closed", state_reason="completed",
                            closed_by="#43", score=0.93, labels=["bug"]),
               RelatedIssue(repo="o/r", number=50, state="open", score=0.97, possible_duplicate=True),
               RelatedIssue(repo="o/r", number=51, state="closed", state_reason="duplicate", duplicate_of=42,
                            score=0.9),
               RelatedIssue(repo="o/r", number=52, state="closed", state_reason="not_planned", score=0.9)]
    comment = render_comment(_result(related=related), taxonomy)
    assert comment.index("Possibly related in this repository") < comment.index("Similar labelled cases")
    assert "#42 Same hang (fixed by #43; labels `bug`" in comment
    assert "#50 (open; similarity 0.97) **possible duplicate**" in comment
    assert "closed as duplicate of #42" in comment and "closed as not planned" in comment


def test_the_repositorys_own_label_suggestions_are_shown_with_their_confidence(taxonomy: Taxonomy) -> None:
    comment = render_comment(_result(repo_labels=[("area: zero", 0.87), ("bug", 1.0)]), taxonomy)
    assert "**Labels this repository uses for issues like this:** `area: zero` (87%), `bug` (99%)" in comment
    assert "Labels this repository" not in render_comment(_result(), taxonomy)
