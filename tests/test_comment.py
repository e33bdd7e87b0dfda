from __future__ import annotations

from bot.comment import escape_markdown, has_marker, render_comment
from bot.domain import AxisPrediction, EnvironmentFacts, Neighbour, TriageResult
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
