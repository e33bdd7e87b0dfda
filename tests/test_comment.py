"""The comment a maintainer reads: real engine results for realistic reports, with the fields the repository
memory, the signature index and the diagnostic knowledge base set as they set them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from bot.comment import (
    ASK_MISSING,
    NEEDS_DETAILS,
    CommentPolicy,
    Substance,
    compose_comment,
    escape_markdown,
    has_marker,
    plan_comment,
    should_comment,
    silence_reason,
)
from bot.core.domain import AxisPrediction, Diagnosis, EnvironmentFacts, Issue, Neighbour, RelatedIssue, TriageResult
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import Engine
from eval.comment_scoring import pinging_links, text_shows

REPO = "deepspeedai/DeepSpeed"
BATCH = Issue(id="b", repo=REPO, number=9001, title="deepspeed.initialize fails with the batch size check",
              body="Calling deepspeed.initialize with my config on 2 nodes x 8 GPUs raises:\n```\n"
                   "AssertionError: Check batch related parameters. train_batch_size is not equal to "
                   "micro_batch_per_gpu * gradient_acc_step * world_size 64 != 2 * 8 * 2\n```\n"
                   "config: train_batch_size 64, train_micro_batch_size_per_gpu 2, gradient_accumulation_steps 8. "
                   "deepspeed 0.14.0, torch 2.3.1+cu121, launched with `deepspeed --num_gpus 8 train.py`.")
SIGNATURE = ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
             "gradient_acc_step * world_size <N> != <N>")  # BATCH's canonical signature (reading/signatures.py)
DIAGNOSIS = Diagnosis(id="batch_size_assertion", title="Batch size check",
                      reading="`train_batch_size` must equal micro-batch x gradient accumulation x world size.",
                      next_step="Set two of them, or leave `train_batch_size` out and let DeepSpeed derive it.",
                      symptoms=["api_exception"], stage="data_model_preparation",
                      root_cause="distributed_config_error", fix_pattern="distributed_feature_tuning",
                      ask=None, matched="AssertionError: Check batch related parameters")


@pytest.fixture(scope="module")
def batch(engine: Engine) -> TriageResult:
    """The engine's result, its symptom pinned to the one this report shows (the labels are the predictors'
    concern, tested elsewhere; here they are an input) and its neighbours left to each test."""
    result = engine.triage(BATCH)
    predictions = dict(result.predictions)
    predictions["symptom"] = AxisPrediction(label="api_exception", confidence=0.8, top=[("api_exception", 0.8)])
    return result.model_copy(update={"predictions": predictions, "neighbours": []})


def _fixed(number: int = 4321, **update: object) -> RelatedIssue:
    fields: dict[str, object] = dict(repo=REPO, number=number, title="Batch assertion with gradient accumulation",
                                     state="closed", state_reason="completed", closed_by="#4330",
                                     released_in="v0.14.1", score=0.62, signature=SIGNATURE)
    return RelatedIssue.model_validate(fields | update)


def _lines(comment: str) -> list[str]:
    return [line for line in comment.splitlines() if line and not line.startswith("<!--")]


def test_a_closed_issue_with_the_same_error_leads_the_comment_with_how_it_ended(batch: TriageResult,
                                                                              taxonomy: Taxonomy) -> None:
    result = batch.model_copy(update={"related": [_fixed()]})
    comment = compose_comment(BATCH, result, taxonomy)
    assert comment is not None and has_marker(comment)
    first, second = _lines(comment)[:2]
    assert first == "**Seen before:**"
    assert second.startswith("- #4321 Batch assertion with gradient accumulation (closed, fixed by #4330, "
                             "released in v0.14.1), same error `AssertionError: Check batch")


def test_an_open_issue_with_the_same_error_is_a_possible_duplicate_and_one_below_the_floor_is_left_out(
        batch: TriageResult, taxonomy: Taxonomy) -> None:
    related = [_fixed(77, state="open", state_reason=None, closed_by=None, released_in=None),
               _fixed(78, signature=None, score=0.5),
               _fixed(79, signature=None, score=0.85, closed_by="0123456789abcdef0"),
               _fixed(80, signature=None, score=0.9, state_reason="not_planned", closed_by=None)]
    comment = compose_comment(BATCH, batch.model_copy(update={"related": related}), taxonomy) or ""
    assert "- #77 " in comment and "(open: possible duplicate)" in comment
    assert "#78" not in comment  # neither the same error nor above the related floor
    assert "#79" in comment and "fixed by commit 0123456789ab" in comment
    assert "#80" in comment and "closed as not planned" in comment


def test_at_most_three_precedents_the_repositorys_own_first_then_labelled_cases(batch: TriageResult,
                                                                              taxonomy: Taxonomy) -> None:
    cases = [Neighbour(id=f"NVIDIA/Megatron-LM#{n}", url=f"https://github.com/NVIDIA/Megatron-LM/issues/{n}",
                       type="issue", score=0.9, signature=SIGNATURE,
                       labels={"symptom": "api_exception", "fix_pattern": "distributed_feature_tuning"})
             for n in (5, 6)]
    comment = compose_comment(BATCH, batch.model_copy(update={"related": [_fixed(1), _fixed(2)], "neighbours":
                                                              cases}), taxonomy) or ""
    listed = [line for line in comment.splitlines() if line.startswith("- ") and "[ ]" not in line]
    assert len(listed) == 3
    assert listed[0].startswith("- #1 ") and listed[1].startswith("- #2 ") and "Megatron-LM #5" in listed[2]


def test_labelled_cases_only_when_they_share_the_error_or_pass_the_floor(batch: TriageResult,
                                                                       taxonomy: Taxonomy) -> None:
    shared = Neighbour(id="hpcaitech/ColossalAI#11", url="https://github.com/hpcaitech/ColossalAI/issues/11",
                       type="issue", score=0.41, labels={"symptom": "api_exception",
                                                          "fix_pattern": "distributed_feature_tuning"},
                       signature=SIGNATURE)
    far = Neighbour(id="hpcaitech/ColossalAI#12", url="https://github.com/hpcaitech/ColossalAI/issues/12",
                    type="issue", score=0.6, labels={"symptom": "api_exception"})
    comment = compose_comment(BATCH, batch.model_copy(update={"neighbours": [far, shared]}), taxonomy) or ""
    assert "ColossalAI #11" in comment and "resolved by distributed or resource settings" in comment
    assert "same error `AssertionError" in comment
    assert "ColossalAI #12" not in comment


def test_a_pull_request_of_the_pack_is_a_precedent_only_by_the_same_error(batch: TriageResult,
                                                                          taxonomy: Taxonomy) -> None:
    close = Neighbour(id=f"{REPO}#7", url=f"https://github.com/{REPO}/pull/7", type="pull_request", score=0.95,
                      labels={"symptom": "api_exception", "fix_pattern": "framework_patch"})
    comment = compose_comment(BATCH, batch.model_copy(update={"neighbours": [close]}), taxonomy) or ""
    assert "#7" not in comment
    shared = close.model_copy(update={"signature": SIGNATURE})
    comment = compose_comment(BATCH, batch.model_copy(update={"neighbours": [shared]}), taxonomy) or ""
    assert "- #7 (pull request fixing" in comment


def test_links_to_other_repositories_never_ping_and_the_repositorys_own_stay_plain(batch: TriageResult,
                                                                                  taxonomy: Taxonomy) -> None:
    cases = [Neighbour(id="NVIDIA/Megatron-LM#1", url="https://github.com/NVIDIA/Megatron-LM/issues/1", type="issue",
                       score=0.95, labels={"symptom": "api_exception", "fix_pattern": "distributed_feature_tuning"},
                       signature=SIGNATURE),
             Neighbour(id="hpcaitech/ColossalAI#2", url="https://github.com/hpcaitech/ColossalAI/pull/2",
                       type="pull_request", score=0.9, labels={"symptom": "api_exception"}, signature=SIGNATURE),
             Neighbour(id=f"{REPO}#3", url=f"https://github.com/{REPO}/issues/3", type="issue", score=0.88,
                       labels={"symptom": "api_exception", "fix_pattern": "distributed_feature_tuning"})]
    comment = compose_comment(BATCH, batch.model_copy(update={"neighbours": cases}), taxonomy) or ""
    assert "[Megatron-LM #1](https://redirect.github.com/NVIDIA/Megatron-LM/issues/1)" in comment
    assert "[ColossalAI #2](https://redirect.github.com/hpcaitech/ColossalAI/pull/2) (pull request fixing" in comment
    assert "- #3 " in comment and f"{REPO}/issues/3" not in comment
    assert pinging_links(comment) == 0
    assert not re.search(r"(?<!redirect\.)github\.com/|[\w.-]+/[\w.-]+#\d", comment)  # no URL or owner/repo#N


def test_the_next_step_is_the_first_diagnosis_and_backs_cause_and_fix_saying_so(batch: TriageResult,
                                                                               taxonomy: Taxonomy) -> None:
    other = DIAGNOSIS.model_copy(update={"id": "second", "next_step": "Something else entirely."})
    comment = compose_comment(BATCH, batch.model_copy(update={"diagnoses": [DIAGNOSIS, other]}), taxonomy,
                              CommentPolicy(comment_labels=True)) or ""
    assert f"**Next step:** {DIAGNOSIS.reading} {DIAGNOSIS.next_step}" in comment
    assert "Something else entirely" not in comment
    assert "cause: inconsistent distributed settings (from the error: Batch size check)" in comment
    assert "fix: distributed or resource settings (from the error: Batch size check)" in comment


def test_labels_are_words_on_one_line_never_not_sure_and_cause_only_when_backed(batch: TriageResult,
                                                                               taxonomy: Taxonomy) -> None:
    predictions = dict(batch.predictions)
    predictions["symptom"] = AxisPrediction(label="api_exception", confidence=0.8, top=[("api_exception", 0.8)])
    predictions["stage"] = AxisPrediction(label=None, confidence=0.3, top=[("training", 0.3)])
    predictions["root_cause"] = AxisPrediction(label="distributed_config_error", confidence=0.7,
                                               top=[("distributed_config_error", 0.7)])
    result = batch.model_copy(update={"predictions": predictions, "diagnoses": []})  # no diagnosis backs the cause
    comment = _always(result, taxonomy, issue=BATCH)
    body = comment.split("-->", 1)[1]
    assert "not sure" not in comment.lower() and "|" not in body and "api_exception" not in body
    assert "**Likely:** exception from the API or config." in body  # no stage row, no unbacked cause
    backed = Neighbour(id=f"{REPO}#5", url=f"https://github.com/{REPO}/issues/5", type="issue", score=0.9,
                       labels={"symptom": "api_exception", "root_cause": "distributed_config_error",
                               "fix_pattern": "distributed_feature_tuning"})
    comment = _always(result.model_copy(update={"neighbours": [backed]}), taxonomy, issue=BATCH)
    assert "cause: inconsistent distributed settings (as in #5)" in comment
    assert "symptom:api_exception" in comment.splitlines()[0]  # the ids stay in the hidden marker


def test_the_kind_is_stated_only_for_what_is_not_a_bug_report(engine: Engine, taxonomy: Taxonomy) -> None:
    question = Issue(title="How to set the ZeRO-3 offload ratio for a 70B model?", repo=REPO,
                     body="Is there a documented way to offload only part of the optimizer states to CPU with ZeRO-3? "
                          "I could not find it in the config docs.")
    result = engine.triage(question)
    predictions = dict(result.predictions)
    predictions["kind"] = AxisPrediction(label="usage_question", confidence=0.9, top=[("usage_question", 0.9)])
    case = Neighbour(id=f"{REPO}#8", url=f"https://github.com/{REPO}/issues/8", type="issue", score=0.9,
                     labels={"symptom": "none", "kind": "usage_question"})
    comment = _always(result.model_copy(update={"predictions": predictions, "neighbours": [case]}), taxonomy,
                             issue=question)
    assert "**Likely:** a usage question." in comment and ASK_MISSING not in comment
    assert "#8" not in comment  # a question's precedent is the same question answered before, not a similar case
    body = comment.split("-->", 1)[1]
    assert "cause:" not in body and "fix:" not in body
    assert "bug report" not in _always(engine.triage(BATCH), taxonomy, issue=BATCH)


def test_silence_is_a_pure_decision_of_substance_policy_and_author(taxonomy: Taxonomy) -> None:
    nothing, something = Substance(labels=3, asks=2), Substance(next_step=True)
    assert not should_comment(nothing, CommentPolicy())
    assert should_comment(nothing, CommentPolicy(comment="always"))
    assert not should_comment(something, CommentPolicy(comment="never"))
    for association in ("OWNER", "MEMBER", "COLLABORATOR", "member"):
        assert not should_comment(something, CommentPolicy(), association)
        assert should_comment(something, CommentPolicy(comment_on_members=True), association)
    assert should_comment(something, CommentPolicy(), "CONTRIBUTOR")
    assert should_comment(something, CommentPolicy(), "FIRST_TIME_CONTRIBUTOR")
    assert silence_reason(nothing, CommentPolicy()) == "silent: nothing to add"
    assert silence_reason(something, CommentPolicy(), "OWNER") == "silent: opened by a member"
    assert silence_reason(something, CommentPolicy(comment="never", comment_on_members=True), "NONE") == (
        "silent: the repository's config says comment: never")
    assert silence_reason(something, CommentPolicy(), None) is None


def test_a_members_issue_or_one_with_nothing_to_add_gets_no_comment(batch: TriageResult, engine: Engine,
                                                                    taxonomy: Taxonomy) -> None:
    result = batch.model_copy(update={"related": [_fixed()]})
    assert compose_comment(BATCH, result, taxonomy) is not None
    assert compose_comment(BATCH, result, taxonomy, author_association="MEMBER") is None
    assert compose_comment(BATCH, result, taxonomy, CommentPolicy(comment_on_members=True),
                           author_association="MEMBER") is not None
    plain = Issue(title="Suggestion: a progress bar for checkpoint conversion", repo=REPO,
                  body="It would be nice if the conversion script printed progress for big checkpoints, since "
                       "converting a 70B model takes a while and prints nothing meanwhile.")
    quiet = engine.triage(plain)
    predictions = {axis: p.model_copy(update={"label": None}) for axis, p in quiet.predictions.items()}
    quiet = quiet.model_copy(update={"predictions": predictions, "neighbours": []})
    assert compose_comment(plain, quiet, taxonomy) is None
    assert compose_comment(plain, quiet, taxonomy, CommentPolicy(comment="always")) is not None


def test_a_symptom_alone_is_only_a_label_never_a_comment(batch: TriageResult, taxonomy: Taxonomy) -> None:
    batch = batch.model_copy(update={"diagnoses": []})  # the symptom alone: no diagnosis of the error
    assert compose_comment(BATCH, batch, taxonomy) is None
    assert compose_comment(BATCH, batch, taxonomy, CommentPolicy(comment_labels=True)) is None
    assert "**Likely:** exception from the API or config" in _always(batch, taxonomy, issue=BATCH)


def test_at_most_two_asks_in_the_projects_own_words(engine: Engine, taxonomy: Taxonomy) -> None:
    issue = Issue(title="fused_adam build fails", repo="hpcaitech/ColossalAI",
                  body="Installing from source fails while compiling the CUDA kernels, I only see `error` and the "
                       "install stops. Same with deepspeed installed next to it.")
    result = engine.triage(issue)
    predictions = dict(result.predictions)
    predictions["symptom"] = AxisPrediction(label="installation_build_failure", confidence=0.9,
                                            top=[("installation_build_failure", 0.9)])
    read = result.model_copy(update={"predictions": predictions, "diagnoses": []})
    assert compose_comment(issue, read, taxonomy) is None  # asks alone are no reason to speak
    comment = _always(read, taxonomy, issue=issue)
    asks = re.findall(r"^- \[ \] (.*)$", comment, flags=re.M)
    assert len(asks) == 1 and asks == plan_comment(read, taxonomy, CommentPolicy(), issue).ask_texts
    assert asks[0] in ("the output of `colossalai check -i`", taxonomy.fact("compiler_error").ask_for("Colossal-AI"))
    assert not re.search(r"ds_report|DS_BUILD|launch command", comment)


def test_a_report_with_too_little_text_is_asked_for_the_error_and_versions_only(engine: Engine,
                                                                               taxonomy: Taxonomy) -> None:
    bare = Issue(title="ZeRO-3 broken", body="It does not work.", repo="NVIDIA/Megatron-LM")
    result = engine.triage(bare)
    assert result.needs_details
    assert compose_comment(bare, result, taxonomy) is None  # asks alone never make a comment
    comment = _always(result, taxonomy, issue=bare)
    assert NEEDS_DETAILS in comment and len(re.findall(r"^- \[ \]", comment, flags=re.M)) == 2
    assert "Transformer Engine" in comment and "**Likely:**" not in comment and "Seen before" not in comment


def test_a_bare_report_of_a_failure_without_an_error_is_not_asked_for_a_traceback(engine: Engine,
                                                                                  taxonomy: Taxonomy) -> None:
    bare = Issue(title="Training throughput far below the published TFLOPS", body="Why so slow?",
                 repo="NVIDIA/Megatron-LM")
    result = engine.triage(bare)
    assert result.needs_details

    def asks_when(top: str, confidence: float) -> list[str]:
        symptom = AxisPrediction(label=None, confidence=confidence, top=[(top, confidence)])
        read = result.model_copy(update={"predictions": {**result.predictions, "symptom": symptom}})
        return plan_comment(read, taxonomy, CommentPolicy(), bare).asks

    assert asks_when("slow_performance", 0.95) == ["hardware", "memory_setup"]  # its setup, not a traceback
    assert asks_when("numerical_instability", 0.95)[0] == "precision_setup"
    assert asks_when("slow_performance", 0.5)[0] == "traceback"  # an unclear title: the error and the versions
    assert asks_when("api_exception", 0.95)[0] == "traceback"  # a failure with an error: its traceback
    comment = compose_comment(bare, result, taxonomy) or ""
    assert "**Likely:**" not in comment  # the reading chooses the asks and is never shown


def test_outside_text_in_the_comment_is_inert(batch: TriageResult, taxonomy: Taxonomy) -> None:
    hostile = _fixed(title="@admin [x](http://evil.example) <img src=x onerror=alert(1)>",
                     signature="RuntimeError: `oops` <script>")
    unsafe = Neighbour(id="o/r#2", url="javascript:alert(1)", type="issue", score=0.99, signature=SIGNATURE)
    comment = compose_comment(BATCH, batch.model_copy(update={"related": [hostile], "neighbours": [unsafe]}),
                              taxonomy) or ""
    assert "@admin" not in comment and "](http://evil" not in comment and "<img" not in comment
    assert "javascript:" not in comment and "<script>" not in comment.replace("`RuntimeError: 'oops' <script>`", "")
    assert escape_markdown("a\nb *c* @d", 100) == "a b \\*c\\* @\u200bd"


def test_comments_on_real_gold_reports_keep_every_promise(engine: Engine, taxonomy: Taxonomy, gold_dir: Path) -> None:
    """Every 8th gold issue, read in place: no "not sure", at most two asks and none for a fact its text shows
    (literal evidence), no link that pings another project, the labels in words, at most three precedents."""
    records = [json.loads(line) for line in (gold_dir / "ddl-dev.jsonl").read_text(encoding="utf-8").splitlines()]
    issues = [Issue(id=r["id"], title=r["title"] or "", body=r["body"] or "", repo=r["repo"], number=r["number"])
              for r in records[::8] if r["type"] == "issue"]
    posted = 0
    for issue, result in zip(issues, engine.triage_many(issues), strict=True):
        comment = compose_comment(issue, result, taxonomy)
        if comment is None:
            continue
        posted += 1
        body = comment.split("-->", 1)[1]
        asks = re.findall(r"^- \[ \] (.*)$", body, flags=re.M)
        assert "not sure" not in body.lower() and len(asks) <= 2 and pinging_links(comment) == 0, issue.id
        shown = [f for f in taxonomy.facts if any(taxonomy.fact(f.id).ask_for(fw) in asks
                                                  for fw in (None, "DeepSpeed", "Megatron-LM", "Colossal-AI"))]
        assert not [f.id for f in shown if text_shows(f.id, f"{issue.title}\n{issue.body}", issue.repo)], issue.id
        assert not re.search(r"\b(hang_timeout|api_exception|out_of_memory|bug_report)\b", body), issue.id
        assert len([line for line in body.splitlines() if line.startswith("- ") and "[ ]" not in line]) <= 3
        if issue.repo != "deepspeedai/DeepSpeed":
            assert "ds_report" not in body and "DS_BUILD" not in body, issue.id
    assert 0 < posted < len(issues)  # some speak, some stay silent


def _always(result: TriageResult, taxonomy: Taxonomy, *, issue: Issue) -> str:
    """The comment as `comment: always` posts it (whatever the silence policy would say), labels in words."""
    return compose_comment(issue, result, taxonomy, CommentPolicy(comment="always", comment_labels=True)) or ""


def test_a_stage_alone_is_not_a_line_of_its_own(batch: TriageResult, taxonomy: Taxonomy) -> None:
    batch = batch.model_copy(update={"diagnoses": [], "related": [], "neighbours": []})  # nothing backs a cause
    predictions = dict(batch.predictions)
    predictions["symptom"] = predictions["symptom"].model_copy(update={"label": None})
    predictions["stage"] = predictions["stage"].model_copy(update={"label": "training"})
    unsure = batch.model_copy(update={"predictions": predictions})
    assert "**Likely:**" not in _always(unsure, taxonomy, issue=BATCH)
    predictions["symptom"] = predictions["symptom"].model_copy(update={"label": "hang_timeout"})
    sure = batch.model_copy(update={"predictions": predictions})
    assert "(stage: training)" in _always(sure, taxonomy, issue=BATCH)


def test_the_next_step_is_not_asked_again_and_versions_alone_are_no_reason_to_speak(
        batch: TriageResult, taxonomy: Taxonomy) -> None:
    hang = Issue(id="h", repo=REPO, number=9002, title="Training hangs at step 3000 on 4 nodes",
                 body="All ranks stop printing after step 3000 and GPU utilisation drops to zero; nothing is raised.")
    diagnosis = Diagnosis(id="hang", title="A hang", reading="The job stops making progress.",
                          next_step="Run `py-spy dump --pid <PID>` on every rank and rerun with `NCCL_DEBUG=INFO`.",
                          symptoms=["hang_timeout"], ask="stack_dump")
    hung = batch.model_copy(update={"diagnoses": [diagnosis], "related": [], "neighbours": []})
    plan = plan_comment(hung, taxonomy, CommentPolicy(), hang)
    assert "stack_dump" not in plan.asks and "nccl_debug" not in plan.asks  # the next step already says them
    bare = batch.model_copy(update={"diagnoses": [], "related": [], "neighbours": []})
    only_asks = replace(plan_comment(bare, taxonomy, CommentPolicy(), BATCH), asks=["versions", "traceback"])
    assert only_asks.reasons == () and not should_comment(only_asks.substance, CommentPolicy())


def test_a_label_the_shown_diagnosis_names_otherwise_is_left_out(batch: TriageResult, taxonomy: Taxonomy) -> None:
    predictions = dict(batch.predictions)
    predictions["symptom"] = AxisPrediction(label="segmentation_fault", confidence=0.8,
                                            top=[("segmentation_fault", 0.8)])
    predictions["stage"] = AxisPrediction(label="training", confidence=0.8, top=[("training", 0.8)])
    guessed = batch.model_copy(update={"predictions": predictions, "diagnoses": [DIAGNOSIS]})
    likely = next(line for line in _lines(_always(guessed, taxonomy, issue=BATCH)) if line.startswith("**Likely:**"))
    assert "crash in native code" not in likely and "stage:" not in likely  # the error names api_exception, prep
    assert "cause: inconsistent distributed settings" in likely  # what the diagnosis itself establishes stays
    predictions["symptom"] = predictions["symptom"].model_copy(update={"corrected": True})
    corrected = _always(guessed.model_copy(update={"predictions": predictions}), taxonomy, issue=BATCH)
    assert "crash in native code (set by a maintainer)" in corrected  # a maintainer's word outranks the error
    agreeing = batch.model_copy(update={"diagnoses": [DIAGNOSIS]})
    assert "exception from the API or config" in _always(agreeing, taxonomy, issue=BATCH)


def test_no_ask_rides_beside_a_next_step(batch: TriageResult, taxonomy: Taxonomy) -> None:
    """`ds_report` in the step ("post ... and `ds_report`") and again as "Please add: the output of `ds_report`"
    reads as a template; and without it in the step, an ask beside the step was read as boilerplate too."""
    report = Issue(id="k", repo=REPO, number=9003, title="Generated text differs with DeepSpeed-Inference",
                   body="With init_inference(model, replace_with_kernel_inject=True) the text is gibberish; "
                        "the plain model answers fine.")
    step = Diagnosis(id="kernel", title="Kernel injection", reading="Fused kernels differ.",
                     next_step="Rerun without kernel injection; post the model class and `ds_report`.",
                     symptoms=["incorrect_output"], ask="versions")
    plain = step.model_copy(update={"next_step": "Rerun without kernel injection; post the model class."})
    result = batch.model_copy(update={"diagnoses": [step], "related": [], "neighbours": [],
                                      "environment": EnvironmentFacts(framework="DeepSpeed")})
    assert "versions" not in plan_comment(result, taxonomy, CommentPolicy(), report).asks
    result = result.model_copy(update={"diagnoses": [plain]})
    assert plan_comment(result, taxonomy, CommentPolicy(), report).asks == []
    comment = compose_comment(report, result, taxonomy, CommentPolicy())
    assert comment is not None and "Rerun without kernel injection" in comment and "Please add" not in comment


def test_a_labelled_case_of_the_repository_is_cited_only_from_the_measured_floor(batch: TriageResult,
                                                                                taxonomy: Taxonomy) -> None:
    # 0.80, where 0.80 of the neighbour pairs at or above share the gold symptom (`python -m eval floor --nested`);
    # from 0.75 to 0.80 they share it at 0.55: a case as close as that is another mechanism as often as not
    assert CommentPolicy().similarity_floor == 0.80
    case = Neighbour(id=f"{REPO}#3", url=f"https://github.com/{REPO}/issues/3", type="issue", score=0.78,
                     labels={"symptom": "api_exception", "fix_pattern": "distributed_feature_tuning"})
    below = compose_comment(BATCH, batch.model_copy(update={"neighbours": [case]}), taxonomy) or ""
    assert "#3" not in below
    close = case.model_copy(update={"score": 0.82})
    assert "- #3 " in (compose_comment(BATCH, batch.model_copy(update={"neighbours": [close]}), taxonomy) or "")
    shared = case.model_copy(update={"signature": SIGNATURE})  # the same error: cited whatever the cosine
    assert "- #3 " in (compose_comment(BATCH, batch.model_copy(update={"neighbours": [shared]}), taxonomy) or "")
