"""The diagnostic knowledge base: each entry fires on its examples and not on its near misses, in any log format,
only for its frameworks and never on a question; ranking, superseding, bounded work and errors that name the field."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.core.errors import ConfigError
from bot.knowledge.diagnostics import (
    MAX_DIAGNOSES,
    KnowledgeBase,
    diagnose,
    diagnostics_path,
    load_diagnostics,
    load_diagnostics_file,
)
from bot.knowledge.facts import NON_BUG_KINDS
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.textmatch import MAX_INPUT_CHARS, compile_pattern, required_literal

EXAMPLES: dict[str, dict[str, list[Any]]] = yaml.safe_load(
    (Path(__file__).parent / "diagnostics_examples.yaml").read_text(encoding="utf-8"))
NEUTRAL_TITLE = "Training fails on 2 nodes"
PREFIXES = ("[rank7]: ", "10.0.0.12: [2025-03-01 12:00:01,555] ", "[1,3]<stderr>:", "node-04: [default3]:",
            "[E0301 12:00:01.555000 ProcessGroupNCCL.cpp:1010] ", "3: 2025-03-01T12:00:01.555+00:00 ")


def _issue(entry_id: str, example: str | dict[str, str]) -> tuple[str, str, str | None]:
    frameworks = load_diagnostics().entry(entry_id).frameworks
    default = frameworks[0] if frameworks else None
    if isinstance(example, str):
        return NEUTRAL_TITLE, example, default
    return example.get("title", NEUTRAL_TITLE), example.get("body", ""), example.get("framework", default)


def _params(which: str) -> list[Any]:
    return [pytest.param(entry_id, example, id=f"{entry_id}-{n}")
            for entry_id, data in EXAMPLES.items() for n, example in enumerate(data[which])]


def _shown(title: str, body: str, framework: str | None, kind: str | None = "bug_report") -> list[str]:
    return [d.id for d in diagnose(title, body, framework=framework, kind=kind)]


def test_the_shipped_file_has_40_entries_or_more_each_with_examples_and_near_misses() -> None:
    base = load_diagnostics()
    assert len(base.entries) >= 40
    assert list(EXAMPLES) == [e.id for e in base.entries]
    assert all(data.get("fires") and data.get("quiet") for data in EXAMPLES.values())


def test_no_text_of_the_shipped_file_is_cut_by_a_yaml_comment() -> None:
    # In a plain (unquoted) YAML scalar, " #" starts a comment: "fixed in 0.11.2 (#4538, #4557)" would lose its tail
    # silently, and the comment would print a reading cut mid-sentence. Such texts must be quoted.
    plain = re.compile(r"^\s+(?:reading|next_step|follow_up|title): ([^'\"].*)$")
    cut = [f"line {n}: {m.group(1)[:60]}" for n, line in
           enumerate(diagnostics_path().read_text(encoding="utf-8").splitlines(), 1)
           if (m := plain.match(line)) and " #" in m.group(1)]
    assert not cut, cut


@pytest.mark.parametrize(("entry_id", "example"), _params("fires"))
def test_an_entry_fires_on_its_examples(entry_id: str, example: str | dict[str, str]) -> None:
    title, body, framework = _issue(entry_id, example)
    found = {d.id: d for d in diagnose(title, body, framework=framework, kind="bug_report")}
    assert entry_id in found, f"{entry_id} did not fire; shown: {list(found)}"
    matched = found[entry_id].matched
    assert matched and "\n" not in matched and matched in f"{title}\n{body}"


@pytest.mark.parametrize(("entry_id", "example"), _params("quiet"))
def test_an_entry_stays_quiet_on_its_near_misses(entry_id: str, example: str | dict[str, str]) -> None:
    title, body, framework = _issue(entry_id, example)
    fired = [entry.id for entry, _ in load_diagnostics().fired(title, body, framework)]
    assert entry_id not in fired


@pytest.mark.parametrize(("entry_id", "example"), _params("fires"))
def test_rank_prefixes_hosts_and_timestamps_do_not_hide_the_error(entry_id: str,
                                                                    example: str | dict[str, str]) -> None:
    title, body, framework = _issue(entry_id, example)
    prefixes = cycle(PREFIXES)
    logged = "\n".join(next(prefixes) + line for line in body.splitlines())
    assert entry_id in _shown(title, logged, framework)


@pytest.mark.parametrize("entry_id", [e.id for e in load_diagnostics().entries if e.frameworks])
def test_an_entry_for_some_frameworks_stays_silent_for_others_and_when_unknown(entry_id: str) -> None:
    entry = load_diagnostics().entry(entry_id)
    title, body, _ = _issue(entry_id, EXAMPLES[entry_id]["fires"][0])
    others = {"DeepSpeed", "Megatron-LM", "Colossal-AI", "Horovod"} - set(entry.frameworks)
    for framework in [None, *sorted(others)]:
        assert entry_id not in [e.id for e, _ in load_diagnostics().fired(title, body, framework)], framework


@pytest.mark.parametrize("kind", sorted(NON_BUG_KINDS))
def test_a_question_gets_only_the_answers_and_a_feature_request_only_the_existing_options(kind: str) -> None:
    entries = load_diagnostics().entries
    answers = {e.id for e in entries if (e.requests if kind == "feature_request" else e.questions)}
    assert len(answers) >= (5 if kind == "feature_request" else 8)
    answered = set()
    for entry_id, data in EXAMPLES.items():
        for example in data["fires"]:
            title, body, framework = _issue(entry_id, example)
            shown = _shown(title, body, framework, kind)
            assert set(shown) <= answers, (entry_id, shown)
            answered |= set(shown)
    assert answered == answers
    assert diagnose("[FEATURE] Support FP8 all-gather", "Would be nice: RuntimeError: CUDA out of memory is common.",
                    framework="DeepSpeed", kind="feature_request") == []
    assert diagnose("How do I read this?", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
                    framework="DeepSpeed", kind="usage_question") == []
    # A request for what a documented option already does is answered with the option; a how-to is not a request.
    shown = diagnose("[Feature] Uneven pipeline split", "Please allow splitting the layers unevenly over pipeline "
                     "stages; 7 layers cannot go on 2 stages.", framework="Megatron-LM", kind="feature_request")
    assert [d.id for d in shown] == ["megatron_uneven_pipeline_split"]
    assert diagnose("[REQUEST] AutoTP training support for Qwen3-MoE", "", framework="DeepSpeed",
                    kind="feature_request") == []
    assert [d.id for d in diagnose("[REQUEST] AutoTP training support for Qwen3-MoE", "", framework="DeepSpeed",
                                   kind="usage_question")] == ["deepspeed_autotp_training_howto"]


def test_an_entry_that_answers_requests_but_not_questions_is_refused(tmp_path: Path) -> None:
    entry = {"id": "some_option", "title": "An option", "title_patterns": ["some option"], "symptoms": ["none"],
             "reading": "A reading.", "next_step": "A step.", "requests": True}
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [entry]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"entry 'some_option' \(entries\[0\]\).*`requests: true` needs"):
        load_diagnostics_file(path)
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [{**entry, "questions": True}]}),
                    encoding="utf-8")
    assert load_diagnostics_file(path).entry("some_option").requests


def test_an_entry_is_silent_on_an_issue_opened_before_its_step_existed(tmp_path: Path) -> None:
    # `since`: the day the step became true. Before it the reporter could not have taken it (an option not yet
    # shipped, a fix not yet released), so the entry is left out and what it supersedes speaks instead.
    generic = {"id": "generic_build", "title": "Build failed", "patterns": ["build failed"], "symptoms": ["none"],
               "reading": "A reading.", "next_step": "Post the first error line."}
    fixed = {**generic, "id": "fixed_in_release", "title": "Fixed in 1.2", "requires": ["version 1\\.1"],
             "next_step": "Upgrade to 1.2.", "since": "2024-08-15", "supersedes": ["generic_build"]}
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [fixed, generic]}),
                    encoding="utf-8")
    base = load_diagnostics_file(path)
    body = "build failed on version 1.1"

    def shown(opened: Any) -> list[str]:
        return [d.id for d in diagnose("", body, framework=None, kind="bug_report", base=base, opened=opened)]

    assert shown(datetime(2024, 6, 17, tzinfo=UTC)) == ["generic_build"]
    assert shown(date(2024, 8, 15)) == ["fixed_in_release"]  # released that day
    assert shown(datetime(2025, 1, 2, tzinfo=UTC)) == ["fixed_in_release"]
    assert shown(None) == ["fixed_in_release"]  # undated: read as opened now, as the App reads a new issue
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [
        {**fixed, "since": "someday"}, generic]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"entry 'fixed_in_release' \(entries\[0\]\).*since"):
        load_diagnostics_file(path)


def test_a_framework_s_issue_gets_that_framework_s_text_and_others_the_general_one(tmp_path: Path) -> None:
    entry = {**ENTRY, "reading": "General reading.", "next_step": "General step.", "done_when": ["did the step"],
             "follow_up": "General follow-up.",
             "by_framework": {"DeepSpeed": {"next_step": "DeepSpeed step.", "follow_up": "DeepSpeed follow-up."},
                              "Megatron-LM": {"reading": "Megatron-LM reading."}}}
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [entry]}), encoding="utf-8")
    base = load_diagnostics_file(path)

    def shown(framework: str | None, body: str = "made-up failure") -> tuple[str, str, str | None]:
        [found] = diagnose("", body, framework=framework, kind="bug_report", base=base)
        return found.reading, found.next_step, found.follow_up

    assert shown("DeepSpeed") == ("General reading.", "DeepSpeed step.", "DeepSpeed follow-up.")
    assert shown("Megatron-LM") == ("Megatron-LM reading.", "General step.", "General follow-up.")
    assert shown("Colossal-AI") == shown(None) == ("General reading.", "General step.", "General follow-up.")


def test_the_shipped_entries_with_a_since_date_are_dated_from_a_release() -> None:
    dated = [e for e in load_diagnostics().entries if e.since is not None]
    assert dated, "no entry carries `since`"
    assert all(date(2020, 1, 1) <= e.since <= date.today() for e in dated)


def test_the_specific_error_comes_first_the_superseded_and_the_fallback_are_left_out() -> None:
    body = "\n".join([
        "RuntimeError: Error building extension 'cpu_adam'",  # DeepSpeed's own op: supersedes the generic build
        "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "[ERROR] [launch.py:321:sigkill_handler] ['python', 'train.py'] exits with return code = -9",
        "Segmentation fault (core dumped)",
        "Aborted (core dumped)",  # a fallback: shown only when nothing else is recognised
    ])
    assert _shown("Fine-tuning crashes", body, "DeepSpeed") == [
        "cuda_out_of_memory", "sigkill_host_oom", "segmentation_fault"]  # file order, at most MAX_DIAGNOSES
    assert MAX_DIAGNOSES == 3
    build = "\n".join(body.splitlines()[:2])
    assert _shown("Build fails", build, "DeepSpeed") == ["deepspeed_op_build_failed"]
    assert _shown("Build fails", build, "Megatron-LM") == ["extension_build_failed"]
    assert _shown("Crash", "Aborted (core dumped)", None) == ["process_aborted"]
    assert _shown("Crash", "terminate called after throwing an instance of gloo::IoException\nAborted (core dumped)",
                  None) == ["gloo_connection_failed"]
    # ZeRO-3's prefetch-trace message is informational: beside a real error, only the error speaks.
    trace = "Invalidate trace cache @ step 10: expected module 11, but got module 19"
    assert _shown("ZeRO-3 run", trace, "DeepSpeed") == ["zero3_trace_cache_invalidated"]
    assert _shown("ZeRO-3 run", trace + "\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
                  "DeepSpeed") == ["cuda_out_of_memory"]
    # A fallback that supersedes the entry beside it stays: the barrier warning explains the hang a title reports.
    barrier = ("[rank3]:[W ProcessGroupNCCL.cpp:4115] [PG 0 Rank 3] using GPU 3 to perform barrier as devices used by "
               "this process are currently unknown. This can potentially cause a hang.")
    assert _shown("Training hangs at startup", barrier, "Megatron-LM") == ["barrier_device_unknown"]
    assert _shown("Training hangs at startup", barrier + "\ntorch.cuda.OutOfMemoryError: CUDA out of memory.",
                  "Megatron-LM") == ["cuda_out_of_memory"]


def test_a_diagnosis_carries_its_entry_and_the_line_without_its_log_prefix(taxonomy: Taxonomy) -> None:
    body = ("[2024-06-01 10:00:00,000] [INFO] [config.py:100] starting\n"
            "[rank3]: AssertionError: Check batch related parameters. train_batch_size is not equal to "
            "micro_batch_per_gpu * gradient_acc_step * world_size 96 != 4 * 2 * 8")
    [found] = diagnose("deepspeed.initialize fails", body, framework="DeepSpeed", kind=None)
    assert found.matched.startswith("AssertionError: Check batch related parameters")
    assert found.symptoms == ["api_exception"] and found.stage == "data_model_preparation"
    assert found.root_cause == "distributed_config_error" and found.fix_pattern == "distributed_feature_tuning"
    assert "micro" in found.next_step and found.ask in {f.id for f in taxonomy.facts}


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the block if it runs past `seconds` of wall time (SIGALRM; pytest runs tests in the main thread)."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", ["one line", "words", "repeated error", "near misses", "every literal", "mixed"])
def test_the_work_on_a_200_kb_paste_is_bounded(name: str) -> None:
    literals = " ".join(p.literal or "" for e in load_diagnostics().entries for p in e._compiled["patterns"])
    inputs = {
        "one line": "a" * MAX_INPUT_CHARS,
        "words": "zero3 stage 3 not loss nan exit code -9 " * (MAX_INPUT_CHARS // 40),
        "repeated error": "RuntimeError: CUDA error: out of memory\n" * (MAX_INPUT_CHARS // 40),
        "near misses": "".join(f"[INFO] [launch.py:315:sigkill_handler] Killing subprocess {n}\n"
                               for n in range(MAX_INPUT_CHARS // 60)),
        "every literal": "\n".join(f"{n} {literals[n % 500:n % 500 + 400]}" for n in range(500)),
        "mixed": "\n".join(["x" * 999 + "(" * 50, "(((((" * 400, "[[[[" * 500] * 40),
    }
    # Measured 0.01-0.15 s on one core; a catastrophic case takes minutes: a deadline 200 times the measure
    # tells them apart on any machine. The regex engine checks for signals while it matches, so the alarm
    # interrupts even a runaway match.
    with deadline(30):
        diagnose("t", inputs[name], framework="DeepSpeed", kind=None)


def test_the_final_error_of_a_giant_log_is_still_read() -> None:
    log = "\n".join(f"step {n} loss 2.{n % 97:02d}" for n in range(120_000))  # about 2 MB
    assert _shown("Crash at the end of a long run", log + "\nRuntimeError: CUDA error: no kernel image is available "
                  "for execution on the device", None) == ["no_kernel_image"]


def test_the_literal_prefilter_is_required_by_every_match() -> None:
    assert required_literal(r"Check batch related parameters") == "check batch related parameters"
    assert required_literal(r"\bSIGKILL\b") == "sigkill"
    assert required_literal(r"shape .\[[\d, -]+\]. is invalid for input of size \d+") == \
        " is invalid for input of size "
    assert required_literal(r"x{2,3}yyyy") == "yyyy" and required_literal(r"ninja\.?") == "ninja"
    assert required_literal(r"(?:HIP|NPU) out of memory") == " out of memory"
    assert required_literal(r"a|bcd") is None and required_literal(r"(?:exit ?code|return code)\s*-9") is None


ENTRY = {"id": "made_up", "title": "Made up", "patterns": ["made-up failure"], "symptoms": ["device_error"],
         "reading": "A made-up failure.", "next_step": "Do the made-up thing."}


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"colour": "red"}, "colour", "Extra inputs are not permitted"),
    ({"symptoms": ["it_exploded"]}, "symptoms", "'it_exploded' is not a symptom of taxonomy ddl-v1"),
    ({"stage": "launching"}, "stage", "'launching' is not a stage"),
    ({"fix_pattern": "reboot"}, "fix_pattern", "'reboot' is not a fix_pattern"),
    ({"ask": "horoscope"}, "ask", "'horoscope' is not a fact of taxonomy ddl-v1"),
    ({"patterns": ["unclosed ("]}, "patterns", "does not compile"),
    ({"patterns": ["error.*failed"]}, "patterns", "may backtrack without bound"),
    ({"unless": ["(?:a+)+b"]}, "unless", "may backtrack without bound"),
    # a repeated group holding a repeat one level down (10 s on 14 flags, 109 s on 16 before the check saw it)
    ({"unless_anywhere": [r"^\s*deepspeed\s+(?:--\S+(?:[= ]\S+)?\s+)*\S+\.py\b"]}, "unless_anywhere",
     "may backtrack without bound"),
    ({"frameworks": ["TensorFlowLite"]}, "frameworks", "not among the frameworks"),
    ({"supersedes": ["no_such_entry"]}, "supersedes", "'no_such_entry' is not another entry"),
    ({"reading": "two\nlines"}, "reading", "must be one line"),
    ({"patterns": []}, "made_up", "needs `patterns` or `title_patterns`"),
    ({"by_framework": {"TensorFlowLite": {"next_step": "x"}}}, "by_framework", "not among the frameworks"),
    ({"frameworks": ["DeepSpeed"], "by_framework": {"Megatron-LM": {"next_step": "x"}}}, "by_framework",
     "['Megatron-LM'] never read"),
    ({"by_framework": {"DeepSpeed": {}}}, "by_framework", "needs `reading`, `next_step` or `follow_up`"),
    ({"by_framework": {"DeepSpeed": {"follow_up": "x"}}}, "by_framework", "a `follow_up` needs `done_when`"),
])
def test_a_broken_entry_is_refused_naming_the_file_the_entry_and_the_field(
        tmp_path: Path, change: dict[str, Any], field: str, says: str) -> None:
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [
        {**ENTRY, "id": "other"}, {**ENTRY, **change}]}), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_diagnostics_file(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: entry 'made_up' (entries[1])") and field in message and says in message


def test_a_broken_file_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "diagnostics.yaml"
    for text, says in [("entries: [unclosed", "cannot read as YAML"), ("- a list", "must be a mapping"),
                       ("version: t\ntaxonomy: ddl-v1\nentries: []\n", "entries"),
                       (yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [ENTRY, ENTRY]}),
                        "entry 'made_up' (entries[1]): id: duplicate id")]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError, match="diagnostics") as raised:
            load_diagnostics_file(path)
        assert str(raised.value).startswith(str(path)) and says in str(raised.value)
    with pytest.raises(ConfigError, match="diagnostics file not found"):
        load_diagnostics_file(tmp_path / "missing.yaml")


def test_the_shipped_file_loads_once_per_process() -> None:
    assert load_diagnostics() is load_diagnostics()
    assert isinstance(load_diagnostics_file(diagnostics_path()), KnowledgeBase)


@pytest.mark.parametrize(("pattern", "refused"), [
    (r"(?:ab)+c", False), (r"(?:x{0,3})+", False), (r"(?:(?:a|b) ){0,3}x", False), (r"a+(?:bc)*", False),
    (r"(a+)+", True), (r"(?:\S+ ){0,3}", True), (r"(?:-x+(?:=y)?z)*", True), (r"(?:(?:a|b)+c)+", True),
])
def test_the_backtracking_check_sees_a_repeat_inside_a_repeated_group_at_any_depth(pattern: str, refused: bool) -> None:
    if refused:
        with pytest.raises(ValueError, match="may backtrack without bound"):
            compile_pattern(pattern)
    else:
        assert compile_pattern(pattern).regex.pattern == pattern
