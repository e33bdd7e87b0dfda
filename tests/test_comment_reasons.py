"""Every comment moves the issue forward (issue #21): the reasons to speak, and what never is one.

The composer runs for real on results built as the engine, the repository memory and the knowledge base build
them (the labels here are inputs: the predictors are tested elsewhere). Texts are written for these tests.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.comment import CommentPolicy, Substance, compose, plan_comment, should_comment
from bot.comment.compose import shown_diagnosis
from bot.comment.policy import (
    ASKED_BEFORE,
    NEXT_STEP,
    PRECEDENT,
    REASONS,
    SILENT_FIRST_STEP,
    SILENT_NOTHING,
    silence_reason,
)
from bot.core.domain import AxisPrediction, Diagnosis, EnvironmentFacts, Issue, Neighbour, RelatedIssue, TriageResult
from bot.core.settings import AXES
from bot.knowledge.diagnostics import diagnose
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.normalise import normalise

REPO = "deepspeedai/DeepSpeed"
OPENED = datetime(2024, 6, 1, tzinfo=UTC)
SIGNATURE = "RuntimeError: CUDA error: device-side assert triggered"
ISSUE = Issue(id="i", repo=REPO, number=5000, created_at=OPENED,
              title="device-side assert in the embedding after switching tokenizers",
              body="After swapping the tokenizer for one with a larger vocabulary, the first forward pass fails:\n"
                   "```\nRuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be "
                   "asynchronously reported at some other API call. For debugging consider passing "
                   "CUDA_LAUNCH_BLOCKING=1.\n```\ndeepspeed 0.14.2, torch 2.3.0+cu121, 8 x A100 80GB, launched with "
                   "`deepspeed --num_gpus 8 train.py --deepspeed ds_config.json`. Same failure reported in "
                   "https://github.com/deepspeedai/DeepSpeed/issues/4100.")


def _prediction(label: str | None, confidence: float = 0.9) -> AxisPrediction:
    return AxisPrediction(label=label, confidence=confidence, top=[(label or "none", confidence)])


def _result(issue: Issue, *, kind: str = "bug_report", symptom: str | None = "device_error",
            stage: str | None = "training", diagnoses: list[Diagnosis] | None = None,
            related: list[RelatedIssue] | None = None, neighbours: list[Neighbour] | None = None) -> TriageResult:
    labels = {"kind": kind, "symptom": symptom, "stage": stage, "root_cause": None, "fix_pattern": None}
    found = diagnose(issue.title, issue.body, framework="DeepSpeed", kind=kind) if diagnoses is None else diagnoses
    return TriageResult(issue_id=issue.id, predictions={axis: _prediction(labels[axis]) for axis in AXES},
                        neighbours=neighbours or [], environment=EnvironmentFacts(framework="DeepSpeed"),
                        predictor="test", taxonomy_version="ddl-v1", model_id="test", related=related or [],
                        diagnoses=found, signatures=list(normalise(issue).signatures))


def _related(number: int, **update: object) -> RelatedIssue:
    fields: dict[str, object] = dict(repo=REPO, number=number, title="An earlier report", state="closed",
                                     state_reason="completed", closed_by="#3999", score=0.9,
                                     created_at=datetime(2023, 1, 1, tzinfo=UTC))
    return RelatedIssue.model_validate(fields | update)


# ---------------------------------------------------------------- the policy: a pure function of the substance

@pytest.mark.parametrize(("substance", "reason"), [(Substance(next_step=True), NEXT_STEP),
                                                   (Substance(precedents=1), PRECEDENT),
                                                   (Substance(asked_before=1), ASKED_BEFORE)])
def test_each_reason_alone_makes_a_comment(substance: Substance, reason: str) -> None:
    assert substance.reasons == (reason,) and should_comment(substance, CommentPolicy())


@pytest.mark.parametrize("substance", [Substance(), Substance(labels=4), Substance(asks=1), Substance(asks=2),
                                       Substance(labels=2, asks=2)])
def test_labels_and_asks_never_make_a_comment_on_their_own(substance: Substance) -> None:
    assert substance.reasons == () and not should_comment(substance, CommentPolicy())
    assert should_comment(substance, CommentPolicy(comment="always"))  # the repository's explicit choice


def test_the_reasons_come_in_a_fixed_order_and_ride_with_labels_and_asks() -> None:
    every = Substance(next_step=True, precedents=2, asked_before=1, labels=1, asks=1)
    assert every.reasons == REASONS


# ---------------------------------------------------------------- reasons read from a real plan

def test_a_next_step_is_a_reason_and_the_plan_keeps_it(taxonomy: Taxonomy) -> None:
    plan, comment = compose(ISSUE, _result(ISSUE), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and plan.diagnosis.id == "device_side_assert"
    assert plan.reasons == (NEXT_STEP,) and comment is not None and "**Next step:**" in comment


def test_a_label_line_plus_asks_without_a_reason_is_silence(taxonomy: Taxonomy) -> None:
    vague = Issue(id="v", repo=REPO, title="Training is slower than expected with ZeRO-3",
                  body="Throughput is about half of what I get with ZeRO-2 on the same machine, and I do not know "
                       "which setting causes it. Any idea what to look at?")
    plan, comment = compose(vague, _result(vague, symptom="slow_performance", diagnoses=[]), taxonomy,
                            CommentPolicy())
    assert plan.reasons == () and comment is None
    assert plan.rows  # the labels are there (marker, stored decision, GitHub labels), only not a reason


def test_labels_stay_out_of_the_text_unless_the_repository_asks_for_them(taxonomy: Taxonomy) -> None:
    result = _result(ISSUE)
    _, plain = compose(ISSUE, result, taxonomy, CommentPolicy())
    _, labelled = compose(ISSUE, result, taxonomy, CommentPolicy(comment_labels=True))
    assert plain is not None and labelled is not None
    assert "**Likely:**" not in plain and "**Likely:** CUDA or device error" in labelled
    assert "symptom:device_error" in plain.splitlines()[0]  # the ids stay in the hidden marker


def test_a_question_asked_and_answered_before_is_shown_as_such(taxonomy: Taxonomy) -> None:
    question = Issue(id="q", repo=REPO, number=5001, created_at=OPENED,
                     title="Which batch size does DeepSpeed use with a DataLoader?",
                     body="Is train_batch_size the global batch or per GPU, and what should the DataLoader use?")
    answered = _related(812, title="Meaning of train_batch_size with a DataLoader", closed_by=None, score=0.81)
    unanswered = _related(813, state_reason="not_planned", closed_by=None, score=0.95)
    later = _related(5100, score=0.97, created_at=datetime(2024, 7, 1, tzinfo=UTC))
    far = _related(700, closed_by=None, score=0.7)
    result = _result(question, kind="usage_question", symptom=None, diagnoses=[],
                     related=[later, unanswered, answered, far])
    plan, comment = compose(question, result, taxonomy, CommentPolicy())
    assert plan.reasons == (ASKED_BEFORE,) and comment is not None
    assert "**Asked before:** #812 Meaning of train\\_batch\\_size with a DataLoader (answered)" in comment
    assert "#813" not in comment and "#5100" not in comment and "#700" not in comment
    below = _result(question, kind="usage_question", symptom=None, diagnoses=[], related=[far])
    assert compose(question, below, taxonomy, CommentPolicy())[1] is None  # below the question floor


# ---------------------------------------------------------------- precedents: mechanism, time, the post's links

def test_never_a_precedent_the_post_already_links_nor_one_opened_later(taxonomy: Taxonomy) -> None:
    linked = _related(4100, signature=SIGNATURE)
    later = _related(5200, signature=SIGNATURE, created_at=OPENED)  # opened at the same moment: not before
    earlier = _related(4000, signature=SIGNATURE)
    plan = plan_comment(_result(ISSUE, related=[linked, later, earlier]), taxonomy, CommentPolicy(), ISSUE)
    assert [p.case_id for p in plan.precedents] == [f"{REPO}#4000"]
    case = Neighbour(id=f"{REPO}#5300", url=f"https://github.com/{REPO}/issues/5300", type="issue", score=0.9,
                     labels={"symptom": "device_error", "fix_pattern": "api_usage_correction"},
                     signature=SIGNATURE, created_at=datetime(2025, 1, 1, tzinfo=UTC))
    assert plan_comment(_result(ISSUE, neighbours=[case]), taxonomy, CommentPolicy(), ISSUE).precedents == []


def test_another_repositorys_case_only_when_it_shares_the_error_exactly(taxonomy: Taxonomy) -> None:
    def case(number: int, signature: str | None) -> Neighbour:
        return Neighbour(id=f"hpcaitech/ColossalAI#{number}", url=f"https://github.com/hpcaitech/ColossalAI/issues/"
                         f"{number}", type="issue", score=0.95, signature=signature,
                         labels={"symptom": "device_error", "fix_pattern": "api_usage_correction"})
    plan = plan_comment(_result(ISSUE, neighbours=[case(1, None), case(2, SIGNATURE)]), taxonomy, CommentPolicy(),
                        ISSUE)
    assert [p.case_id for p in plan.precedents] == ["hpcaitech/ColossalAI#2"]


def test_each_precedent_says_how_it_ended_and_an_unresolved_one_only_as_a_possible_duplicate(
        taxonomy: Taxonomy) -> None:
    related = [_related(4001), _related(4002, state_reason="duplicate", duplicate_of=3900, closed_by=None),
               _related(4003, state="open", state_reason=None, closed_by=None, signature=SIGNATURE, score=0.5),
               _related(4004, state="open", state_reason=None, closed_by=None, score=0.9)]
    plan = plan_comment(_result(ISSUE, related=related), taxonomy, CommentPolicy(), ISSUE)
    how = {p.case_id.split("#")[1]: p.how for p in plan.precedents}
    assert how == {"4003": "open: possible duplicate", "4001": "closed, fixed by #3999",
                   "4002": "closed as a duplicate of #3900"}  # the open one without the error is not shown
    unresolved = Neighbour(id=f"{REPO}#4005", url=f"https://github.com/{REPO}/issues/4005", type="issue", score=0.95,
                           labels={"symptom": "device_error", "fix_pattern": "unresolved"})
    assert plan_comment(_result(ISSUE, neighbours=[unresolved]), taxonomy, CommentPolicy(), ISSUE).precedents == []
    sharing = unresolved.model_copy(update={"signature": SIGNATURE})
    shown = plan_comment(_result(ISSUE, neighbours=[sharing]), taxonomy, CommentPolicy(), ISSUE).precedents
    assert [p.how for p in shown] == ["CUDA or device error; not resolved: possible duplicate"]


# ---------------------------------------------------------------- next steps that read the post

def test_a_step_the_post_shows_done_gives_its_follow_up_or_nothing(taxonomy: Taxonomy) -> None:
    done = ISSUE.model_copy(update={"body": ISSUE.body + "\nI already set CUDA_LAUNCH_BLOCKING=1: the failing "
                                                         "call is the embedding lookup."})
    plan, comment = compose(done, _result(done), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and plan.diagnosis.next_step.startswith("With `CUDA_LAUNCH_BLOCKING=1`")
    assert comment is not None and "Rerun with `CUDA_LAUNCH_BLOCKING=1`" not in comment
    without_follow_up = [d.model_copy(update={"follow_up": None}) for d in _result(done).diagnoses]
    plan, comment = compose(done, _result(done, diagnoses=without_follow_up), taxonomy, CommentPolicy())
    assert plan.diagnosis is None and plan.reasons == () and comment is None


def test_a_hang_already_located_to_a_function_is_not_told_to_locate_it(taxonomy: Taxonomy) -> None:
    hang = Issue(id="h", repo=REPO, title="Training hangs after the first checkpoint save",
                 body="On 2 nodes x 8 GPUs every rank stops after saving step 1000. I added prints: it hangs in "
                      "`torch.distributed.barrier()` inside save_checkpoint on ranks 1-15 while rank 0 is still "
                      "writing. NCCL_DEBUG=INFO shows nothing unusual.")
    plan = plan_comment(_result(hang, symptom="hang_timeout"), taxonomy, CommentPolicy(), hang)
    assert plan.diagnosis is not None and plan.diagnosis.id == "hang_reported"
    assert "py-spy dump --pid" not in plan.diagnosis.next_step and "already shows where it waits" in (
        plan.diagnosis.next_step)
    assert "nccl_debug" not in plan.asks and "stack_dump" not in plan.asks


def test_no_label_line_contradicts_the_diagnosis_shown(taxonomy: Taxonomy) -> None:
    killed = Issue(id="k", repo=REPO, title="Training dies with exit code -9 while loading the dataset",
                   body="The launcher reports `exitcode: -9` on node 0 a few minutes into loading a 200 GB dataset "
                        "with 16 DataLoader workers; nothing else is printed.")
    result = _result(killed, symptom="segmentation_fault", stage="inference")
    assert result.diagnoses[0].id == "sigkill_host_oom"
    _, comment = compose(killed, result, taxonomy, CommentPolicy(comment_labels=True))
    assert comment is not None and "crash in native code" not in comment and "stage: inference" not in comment
    native = Neighbour(id=f"{REPO}#10", url=f"https://github.com/{REPO}/issues/10", type="issue", score=0.95,
                       labels={"symptom": "segmentation_fault", "fix_pattern": "version_dependency_management"})
    plan = plan_comment(_result(killed, symptom=None, neighbours=[native]), taxonomy, CommentPolicy(), killed)
    assert plan.precedents == []  # a labelled case of another failure beside the OOM-killer reading


def test_a_bare_signal_is_not_the_same_error_and_a_later_number_is_a_later_issue(taxonomy: Taxonomy) -> None:
    killed = Issue(id="k", repo=REPO, number=3000, title="Rank 3 dies with SIGKILL during the first epoch",
                   body="The launcher prints `Signal 9 (SIGKILL) received by PID 4242` and the job ends; 4 x A100.")
    signals = [s for s in normalise(killed).signatures if s.kind == "signal"]
    assert signals, "the post shows a bare signal"
    case = Neighbour(id=f"{REPO}#2000", url=f"https://github.com/{REPO}/issues/2000", type="issue", score=0.5,
                     labels={"symptom": "out_of_memory", "fix_pattern": "distributed_feature_tuning"},
                     signature=signals[0].text)
    result = _result(killed, symptom="out_of_memory", diagnoses=[], neighbours=[case])
    assert plan_comment(result, taxonomy, CommentPolicy(), killed).precedents == []
    fixed = _related(3100, signature="RuntimeError: CUDA error: out of memory", created_at=None)
    earlier = _related(2900, signature="RuntimeError: CUDA error: out of memory", created_at=None)
    plan = plan_comment(_result(killed, related=[fixed, earlier], diagnoses=[]), taxonomy, CommentPolicy(), killed)
    assert [p.case_id for p in plan.precedents] == [f"{REPO}#2900"]  # #3100 was opened after #3000


def test_an_unresolved_labelled_case_needs_the_error_and_the_floor(taxonomy: Taxonomy) -> None:
    far = Neighbour(id=f"{REPO}#4006", url=f"https://github.com/{REPO}/issues/4006", type="issue", score=0.5,
                    labels={"symptom": "device_error", "fix_pattern": "unresolved"}, signature=SIGNATURE)
    assert plan_comment(_result(ISSUE, neighbours=[far]), taxonomy, CommentPolicy(), ISSUE).precedents == []
    resolved = far.model_copy(update={"labels": {"symptom": "device_error", "fix_pattern": "api_usage_correction"}})
    assert len(plan_comment(_result(ISSUE, neighbours=[resolved]), taxonomy, CommentPolicy(), ISSUE).precedents) == 1


def test_beside_a_next_step_only_what_it_needs_is_asked(taxonomy: Taxonomy) -> None:
    killed = Issue(id="k2", repo=REPO, title="Training dies with exit code -9",
                   body="The launcher reports `exitcode: -9` on node 0 while loading the dataset; nothing else.")
    plan = plan_comment(_result(killed, symptom="segmentation_fault"), taxonomy, CommentPolicy(), killed)
    assert plan.diagnosis is not None and plan.diagnosis.id == "sigkill_host_oom"
    assert plan.asks == []  # the step says to read dmesg; `ds_report` would not change it


def test_a_possible_duplicate_is_of_the_same_repository_and_the_issue_number_may_come_from_its_id(
        taxonomy: Taxonomy) -> None:
    other = Neighbour(id="NVIDIA/Megatron-LM#77", url="https://github.com/NVIDIA/Megatron-LM/issues/77",
                      type="issue", score=0.95, labels={"symptom": "device_error", "fix_pattern": "unresolved"},
                      signature=SIGNATURE)
    assert plan_comment(_result(ISSUE, neighbours=[other]), taxonomy, CommentPolicy(), ISSUE).precedents == []
    batch_line = ISSUE.model_copy(update={"id": f"{REPO}#5000", "number": None, "created_at": None})
    later = _related(5001, signature=SIGNATURE, created_at=None)
    plan = plan_comment(_result(batch_line, related=[later, _related(4999, signature=SIGNATURE)]), taxonomy,
                        CommentPolicy(), batch_line)
    assert [p.case_id for p in plan.precedents] == [f"{REPO}#4999"]


def test_a_playbook_read_from_the_title_alone_is_no_reason_to_speak(taxonomy: Taxonomy) -> None:
    hang = Issue(id="p", repo=REPO, title="Training hangs after a few hundred steps on 16 GPUs",
                 body="Nothing is printed; the GPUs sit at full utilisation until I kill the job.")
    plan, comment = compose(hang, _result(hang, symptom="hang_timeout"), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and plan.diagnosis.playbook
    assert "next_step" not in plan.reasons and comment is None
    watchdog = Issue(id="w", repo=REPO, title="Training hangs after a few hundred steps",
                     body="[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
                          "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800012 "
                          "milliseconds before timing out.")
    plan, comment = compose(watchdog, _result(watchdog, symptom="hang_timeout"), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and not plan.diagnosis.playbook  # read from the post's error line...
    assert plan.diagnosis.localises and comment is None  # ...but "find the rank that is elsewhere" is for any one
    located = watchdog.model_copy(update={"body": watchdog.body + "\nRanks 0-2 hang in `dist.all_reduce()`."})
    plan, comment = compose(located, _result(located, symptom="hang_timeout"), taxonomy, CommentPolicy())
    assert plan.reasons == ("next_step",) and comment is not None and "already shows where it waits" in comment


def test_a_question_the_documentation_answers_gets_the_answer_and_a_post_that_did_it_nothing(
        taxonomy: Taxonomy) -> None:
    question = Issue(id="q", repo=REPO, number=5001, created_at=OPENED, title="How to run on specific GPUs?",
                     body="Our node has 8 GPUs and two of them are used by another job. Which ones does the "
                          "launcher take?")
    result = _result(question, kind="usage_question", symptom="none", stage="environment_setup")
    plan, comment = compose(question, result, taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and plan.diagnosis.id == "deepspeed_launcher_gpu_selection"
    assert not plan.diagnosis.playbook and plan.reasons == ("next_step",)
    assert comment is not None and "--include localhost:1,3" in comment
    tried = question.model_copy(update={"body": question.body + "\nI ran `deepspeed --include localhost:2,3 "
                                                                "train.py` and it still starts on 0."})
    plan, comment = compose(tried, _result(tried, kind="usage_question", symptom="none"), taxonomy, CommentPolicy())
    assert plan.diagnosis is None and comment is None  # the documented step is what they did: nothing to add
    assert silence_reason(plan.substance, CommentPolicy()) == SILENT_NOTHING
    request = question.model_copy(update={"title": "[FEATURE] Let me run on specific GPUs"})
    plan, comment = compose(request, _result(request, kind="feature_request", symptom="none"), taxonomy,
                            CommentPolicy())  # what the request asks for exists: the option answers it
    assert plan.diagnosis is not None and plan.diagnosis.id == "deepspeed_launcher_gpu_selection"
    assert comment is not None and "--include localhost:1,3" in comment
    failure = request.model_copy(update={"title": "[FEATURE] Clearer errors",
                                         "body": "RuntimeError: CUDA error: out of memory on GPU 0"})
    assert _result(failure, kind="feature_request", symptom="none").diagnoses == []  # a request is not a failure


def test_a_shared_out_of_memory_or_watchdog_timeout_is_the_same_symptom_not_the_same_error(
        taxonomy: Taxonomy) -> None:
    oom = Issue(id="o", repo=REPO, number=6000, created_at=OPENED, title="OOM when fine-tuning a 13B model",
                body="torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 79.15 GiB "
                     "total capacity; 75.02 GiB already allocated)\nZeRO-2, 8 x A100, micro-batch 4.")
    shared = [s.text for s in normalise(oom).signatures]
    assert "CUDA out of memory" in shared
    open_oom = _related(5500, state="open", state_reason=None, closed_by=None, score=0.7,
                        signature="CUDA out of memory")
    case = Neighbour(id=f"{REPO}#5400", url=f"https://github.com/{REPO}/issues/5400", type="issue", score=0.6,
                     labels={"symptom": "out_of_memory", "fix_pattern": "unresolved"}, signature="CUDA out of memory")
    plan = plan_comment(_result(oom, symptom="out_of_memory", related=[open_oom], neighbours=[case]), taxonomy,
                        CommentPolicy(), oom)
    assert plan.precedents == []  # another OOM is not a duplicate, nor a precedent of this one's cause
    specific = "ZeRORuntimeException: The checkpoint being loaded used a DP world size of <N>"
    crash = oom.model_copy(update={"body": oom.body + "\ndeepspeed.runtime.zero.utils." + specific.replace(
        "<N>", "8") + " but the current world size is 16."})
    same = [s.text for s in normalise(crash).signatures if "ZeRORuntimeException" in s.text]
    dup = _related(5500, state="open", state_reason=None, closed_by=None, score=0.7, signature=same[0])
    plan = plan_comment(_result(crash, symptom="checkpoint_failure", related=[dup]), taxonomy, CommentPolicy(), crash)
    assert [(p.link, p.how) for p in plan.precedents] == [("#5500", "open: possible duplicate")]


def test_a_reporter_who_brings_the_fix_is_not_told_how_to_localise_it(taxonomy: Taxonomy) -> None:
    nan = Issue(id="n", repo=REPO, number=6100, created_at=OPENED, title="Loss becomes NaN with two flags combined",
                body="With --flag-a and --flag-b together the loss is NaN from step 2; either alone is fine.\n"
                     "loss: nan | grad norm: nan")
    plan = plan_comment(_result(nan, symptom="numerical_instability"), taxonomy, CommentPolicy(), nan)
    assert plan.diagnosis is not None and plan.diagnosis.id == "loss_nan"
    fixed = nan.model_copy(update={"body": nan.body + "\nI opened a PR to fix this: #6101"})
    plan, comment = compose(fixed, _result(fixed, symptom="numerical_instability"), taxonomy, CommentPolicy())
    assert plan.diagnosis is None and comment is None


def test_a_reporter_who_located_the_cause_in_the_code_gets_no_step_but_a_question_about_the_code_does(
        taxonomy: Taxonomy) -> None:
    mixed = Issue(id="m", repo=REPO, number=6100, created_at=OPENED,
                  title="Training step fails under ZeRO with mixed dtypes",
                  body="The first backward fails:\nRuntimeError: Found dtype Float but expected Half\n")
    plan = plan_comment(_result(mixed, symptom="tensor_mismatch"), taxonomy, CommentPolicy(), mixed)
    assert plan.diagnosis is not None and plan.diagnosis.id == "dtype_mismatch" and NEXT_STEP in plan.reasons
    analysed = mixed.model_copy(update={"body": mixed.body + "It turns out the engine returns the output in half "
                                        "precision: https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/"
                                        "runtime/engine.py#L1999 never casts it back."})
    plan, comment = compose(analysed, _result(analysed, symptom="tensor_mismatch"), taxonomy, CommentPolicy())
    assert plan.diagnosis is None and comment is None
    # a question about that code is still answered: the link is what it asks about
    found = diagnose(analysed.title, analysed.body, framework="DeepSpeed", kind="bug_report")
    plan = plan_comment(_result(analysed, kind="usage_question", diagnoses=found), taxonomy, CommentPolicy(), analysed)
    assert plan.diagnosis is not None and plan.diagnosis.id == "dtype_mismatch"


def test_a_build_failure_is_a_precedent_only_by_its_error_never_by_a_close_build_log(taxonomy: Taxonomy) -> None:
    build = Issue(id="b", repo=REPO, number=6100, created_at=OPENED, title="pip install deepspeed fails on our cluster",
                  body="DS_BUILD_OPS=1 pip install deepspeed\n  Running setup.py install for deepspeed ... error\n"
                       "csrc/adam/multi_tensor_adam.cu(112): error: identifier \"__hfma2\" is undefined\n"
                       "gcc 9.4, nvcc 11.3, torch 1.12.1+cu113")
    close_log = _related(4800, score=0.92)  # another build failure, closed, whose error we do not share
    close_case = Neighbour(id=f"{REPO}#5700", url=f"https://github.com/{REPO}/issues/5700", type="issue", score=0.9,
                           labels={"symptom": "installation_build_failure",
                                   "fix_pattern": "version_dependency_management"})
    result = _result(build, symptom="installation_build_failure", stage="environment_setup", diagnoses=[],
                     related=[close_log], neighbours=[close_case])
    assert plan_comment(result, taxonomy, CommentPolicy(), build).precedents == []
    [error] = [s.text for s in normalise(build).signatures]  # "compile error: identifier <VALUE> is undefined"
    sharing = result.model_copy(update={"related": [close_log.model_copy(update={"signature": error})],
                                        "neighbours": [close_case.model_copy(update={"signature": error})]})
    assert [p.link for p in plan_comment(sharing, taxonomy, CommentPolicy(), build).precedents][:1] == ["#4800"]
    # the same closeness still makes a precedent for a failure whose mechanism a close post does tell
    crash = _result(ISSUE, related=[_related(4800, score=0.92)])
    assert [p.link for p in plan_comment(crash, taxonomy, CommentPolicy(), ISSUE).precedents] == ["#4800"]


# ---------------------------------------------------------------- the usual first step of localising: no reason

SEGFAULT = Issue(id="s", repo=REPO, number=6200, created_at=OPENED, title="Segfault at the first step with ZeRO-3",
                 body="The job dies at step 0 on 4 x A100:\n```\nSegmentation fault (core dumped)\n```\n"
                      "deepspeed 0.14.2, torch 2.3.0+cu121.")


def test_the_usual_first_step_of_localising_rides_along_but_never_speaks_alone(taxonomy: Taxonomy) -> None:
    plan, comment = compose(SEGFAULT, _result(SEGFAULT, symptom="segmentation_fault"), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and plan.diagnosis.id == "segmentation_fault" and plan.diagnosis.localises
    assert plan.reasons == () and comment is None  # the same step for every segfault: silence scores the same
    # the decision says why: the error was recognised, its step withheld (not "nothing to add")
    assert silence_reason(plan.substance, CommentPolicy()) == SILENT_FIRST_STEP
    earlier = _related(5900, score=0.9)  # the repository's own issue past the related floor: a precedent
    plan, comment = compose(SEGFAULT, _result(SEGFAULT, symptom="segmentation_fault", related=[earlier]), taxonomy,
                            CommentPolicy())
    assert plan.reasons == (PRECEDENT,) and comment is not None
    assert "#5900" in comment and "`python -X faulthandler ...`" in comment  # the step rides along


def test_a_localising_steps_follow_up_reads_the_post_and_speaks(taxonomy: Taxonomy) -> None:
    stacked = SEGFAULT.model_copy(update={"body": SEGFAULT.body + "\nWith faulthandler:\n```\nFatal Python error: "
                                                                  "Segmentation fault\n\nCurrent thread "
                                                                  "0x00007f3a (most recent call first):\n  File "
                                                                  "\"stage3.py\", line 412 in step\n```"})
    plan, comment = compose(stacked, _result(stacked, symptom="segmentation_fault"), taxonomy, CommentPolicy())
    assert plan.diagnosis is not None and not plan.diagnosis.localises
    assert plan.diagnosis.next_step.startswith("The native stack names the library it crashed in")
    assert plan.reasons == (NEXT_STEP,) and comment is not None and "faulthandler ...`" not in comment


def test_a_step_that_names_the_cause_is_not_a_localising_one(taxonomy: Taxonomy) -> None:
    # the port in use names the cause and its remedy; a size mismatch's "compare the sizes" does not
    busy = Issue(id="a", repo=REPO, title="Cannot start a second job on the node",
                 body="RuntimeError: The server socket has failed to listen on any local network address. "
                      "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).")
    [first, *_] = _result(busy, symptom="launch_failure").diagnoses
    assert first.id == "address_in_use" and not first.localises
    shapes = Issue(id="z", repo=REPO, title="Size mismatch in the attention with TP=2",
                   body="RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at "
                        "non-singleton dimension 2")
    [first, *_] = _result(shapes, symptom="tensor_mismatch").diagnoses
    assert first.id == "tensor_size_mismatch" and first.localises


def _diagnosis(entry: str, symptom: str = "hang_timeout", **flags: object) -> Diagnosis:
    return Diagnosis.model_validate({"id": entry, "title": entry, "reading": "r.", "next_step": f"step {entry}",
                                     "symptoms": [symptom], **flags})


def test_a_later_step_of_the_same_failure_that_names_a_mechanism_is_shown_over_a_localising_first(
        taxonomy: Taxonomy) -> None:
    generic = _diagnosis("watchdog", localises=True)
    mechanism = _diagnosis("mechanism")
    assert shown_diagnosis([generic, _diagnosis("title", playbook=True), mechanism]) == mechanism
    assert shown_diagnosis([generic, _diagnosis("other", symptom="out_of_memory")]) == generic  # another failure
    assert shown_diagnosis([generic, _diagnosis("tried", done=True)]) == generic  # nothing better: it rides along
    shown = shown_diagnosis([generic, _diagnosis("located", done=True, follow_up="after")])
    assert shown is not None and (shown.id, shown.next_step, shown.localises) == ("located", "after", False)
    title_only = _diagnosis("title", done=True, follow_up="after", playbook=True)  # a playbook stays one
    assert shown_diagnosis([generic, title_only]) == generic
    assert shown_diagnosis([_diagnosis("done", done=True), mechanism]) is None  # the first was done: no step
    hang = Issue(id="f", repo=REPO, title="Training hangs at the first allreduce",
                 body="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for "
                      "1800000 milliseconds before timing out.")
    plan, comment = compose(hang, _result(hang, symptom="hang_timeout"), taxonomy, CommentPolicy())
    assert [d.id for d in _result(hang).diagnoses][:1] == ["nccl_watchdog_timeout"]
    assert plan.diagnosis is not None and plan.diagnosis.id == "hang_at_process_group_init"
    assert plan.reasons == (NEXT_STEP,) and comment is not None
