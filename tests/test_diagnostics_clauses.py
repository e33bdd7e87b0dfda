"""Clauses of a knowledge-base text that hold for some frameworks or from a day (bot/knowledge/clauses.py): how they
read, how a broken one is reported, and that no shipped text shows an issue another framework's API or a release
that had not shipped on the day it was opened."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
import yaml

from bot.core.errors import ConfigError
from bot.knowledge import clauses
from bot.knowledge.diagnostics import diagnose, load_diagnostics, load_diagnostics_file
from bot.knowledge.entry import KNOWN_FRAMEWORKS

FRAMEWORKS = {"DeepSpeed", "Megatron-LM", "Colossal-AI"}
TEXT = ("Call backward once per step<only DeepSpeed> (with DeepSpeed, only `engine.backward(loss)`)</only>"
        "<only Megatron-LM, Colossal-AI> (the schedule calls it)</only>. <before 2023-03-03>Set `PDSH_SSH_ARGS_APPEND`."
        "</before><from 2023-03-03>Upgrade to 0.8.1.</from>")


@pytest.mark.parametrize(("framework", "opened", "expected"), [
    ("DeepSpeed", date(2023, 3, 2),
     "Call backward once per step (with DeepSpeed, only `engine.backward(loss)`). Set `PDSH_SSH_ARGS_APPEND`."),
    ("Megatron-LM", date(2023, 3, 3), "Call backward once per step (the schedule calls it). Upgrade to 0.8.1."),
    ("Horovod", None, "Call backward once per step. Upgrade to 0.8.1."),  # undated: read as opened now
    (None, date(2020, 1, 1), "Call backward once per step. Set `PDSH_SSH_ARGS_APPEND`."),  # unknown: the general text
])
def test_a_text_keeps_the_clauses_that_hold_for_the_issue_s_framework_and_day(
        framework: str | None, opened: date | None, expected: str) -> None:
    assert clauses.check(TEXT, FRAMEWORKS) == TEXT
    assert clauses.render(TEXT, framework, opened) == expected


def test_the_space_a_removed_clause_leaves_is_closed() -> None:
    text = ("Install pdsh <only DeepSpeed>(or pick `--launcher openmpi`)</only>, then `pip install .` "
            "( <only DeepSpeed>x</only> ) <only DeepSpeed>and y</only> and retry <only Megatron-LM>z</only>.")
    assert clauses.render(text, "Colossal-AI", None) == "Install pdsh, then `pip install .` and retry."
    assert clauses.render(text, "DeepSpeed", None) == (
        "Install pdsh (or pick `--launcher openmpi`), then `pip install .` ( x ) and y and retry.")
    assert clauses.render("<before 2024-01-01>Pin it;</before> upgrade.", "DeepSpeed", None) == "upgrade."
    unchanged = "No clause here:  two spaces stay ."
    assert clauses.render(unchanged, "DeepSpeed", None) == unchanged


@pytest.mark.parametrize(("text", "message"), [
    ("a <only TensorFlowLite>b</only>", r"\['TensorFlowLite'\] not among the frameworks"),
    ("a <only DeepSpeed>b <from 2023-01-01>c</from></only>", "clauses do not nest"),
    ("a <only DeepSpeed>b", "a clause tag without its pair"),
    ("a <from 2023-01-01>b</before>", "a clause tag without its pair"),
    ("a <from someday>b</from>", "a clause's day is YYYY-MM-DD"),
    ("a <only DeepSpeed> </only>", "an empty clause"),
    ("<before 2023-01-01>only before</before>", "says nothing for framework None on None"),
    ("<only DeepSpeed>DeepSpeed only</only>", "says nothing for framework None"),
])
def test_a_broken_clause_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clauses.check(text, FRAMEWORKS)


ENTRY = {"id": "made_up", "title": "A made-up failure", "patterns": ["made-up failure"],
         "symptoms": ["api_exception"], "reading": "It failed<only DeepSpeed> in the engine</only>.",
         "next_step": "<before 2024-08-15>Pin the old release.</before><from 2024-08-15>Upgrade to 1.0.</from>"}


def _base(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [{**ENTRY, **fields}]}),
                    encoding="utf-8")
    return path


def test_a_diagnosis_reads_its_clauses_for_the_issue_s_framework_and_opening_day(tmp_path: Path) -> None:
    base = load_diagnostics_file(_base(tmp_path))

    def shown(framework: str | None, opened: date | None) -> tuple[str, str]:
        [found] = diagnose("", "made-up failure", framework=framework, kind="bug_report", base=base, opened=opened)
        return found.reading, found.next_step

    assert shown("DeepSpeed", date(2024, 8, 14)) == ("It failed in the engine.", "Pin the old release.")
    assert shown("Megatron-LM", date(2024, 8, 15)) == ("It failed.", "Upgrade to 1.0.")


@pytest.mark.parametrize(("fields", "where", "message"), [
    ({"frameworks": ["DeepSpeed", "Megatron-LM"], "reading": "x<only Colossal-AI> y</only>."}, "reading",
     "not among the frameworks"),
    ({"by_framework": {"Megatron-LM": {"next_step": "x<only DeepSpeed> y</only>."}}},
     r"by_framework\.Megatron-LM\.next_step", "not among the frameworks"),
    ({"done_when": ["did it"], "follow_up": "x <from 2024-13-01>y</from>"}, "follow_up", "YYYY-MM-DD"),
])
def test_a_broken_clause_in_the_file_names_the_entry_and_the_field(
        tmp_path: Path, fields: dict[str, object], where: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"entry 'made_up' \(entries\[0\]\).*{where}.*{message}"):
        load_diagnostics_file(_base(tmp_path, **fields))


# Each framework's own flags and APIs. A text shown on one framework's issues names another's only where the entry's
# own patterns do: the error line itself is the other framework's (Accelerate reading a DeepSpeed config).
API = {
    "DeepSpeed": r"deepspeed\.[a-z_]|\bds_config\b|ds_report|zero_optimization|\"offload_optimizer\"|~/\.deepspeed_env"
                 r"|get_accelerator|`deepspeed[ `]|DS_BUILD_|\"(?:bf16|fp16)\": \{|stage3_"
                 r"|train_micro_batch_size_per_gpu|--deepspeed\b|engine\.backward",
    "Megatron-LM": r"--tensor-model-parallel|--pipeline-model-parallel|--use-flash-attn|--recompute-|--fp8-format"
                   r"|--attention-backend|--sequence-parallel|megatron/|pretrain_gpt|--micro-batch-size"
                   r"|--global-batch-size|--transformer-impl|\bmpu\.|--use-mcore|megatron\.core|--seq-length"
                   r"|--tokenizer-type|fused_kernels",
    "Colossal-AI": r"[Bb]ooster|\w+Plugin\b|colossalai\.|colossalai run|LazyInitContext|ColoTensor|CUDA_EXT"
                   r"|colossalai/",
}


# Failures that only one framework's tool produces, on whichever repository they are reported: their texts name it.
ONE_FRAMEWORK_S_TOOL = {
    "pdsh_missing": "only the `deepspeed` launcher runs pdsh",
    "accelerate_deepspeed_batch_size_unknown": "the message is Accelerate's DeepSpeed plugin's",
}


def test_no_shipped_text_shows_an_issue_another_framework_s_api() -> None:
    entries = load_diagnostics().entries
    wrong = []
    for entry in (e for e in entries if e.id not in ONE_FRAMEWORK_S_TOOL):
        own_words = " ".join((*entry.patterns, *entry.title_patterns, *entry.requires))
        for framework in sorted(set(entry.frameworks or FRAMEWORKS) & FRAMEWORKS):
            own = entry.by_framework.get(framework)
            for name in ("reading", "next_step", "follow_up"):
                text = (own and getattr(own, name)) or getattr(entry, name)
                if not text:
                    continue
                for _, opened in clauses.occasions(text, KNOWN_FRAMEWORKS):
                    shown = clauses.render(text, framework, opened)
                    wrong += [f"{entry.id}.{name} on {framework}: {m.group(0)!r}" for other, api in API.items()
                              if other != framework and not re.search(api, own_words)
                              for m in [re.search(api, shown)] if m]
    assert not wrong, "\n".join(sorted(set(wrong)))
    assert any("<only " in (e.next_step + e.reading) for e in entries), "no shipped entry uses a framework clause"


def test_no_shipped_text_names_a_release_before_the_issue_could_have_it() -> None:
    """A text that says "Upgrade to X" holds it in a `<from DAY>` clause (or the entry is dated `since`), so an issue
    opened before X shipped is not told to install it."""
    upgrade = re.compile(r"\b(?:[Uu]pgrade|[Uu]pdate) (?:to |DeepSpeed to |Megatron-LM to |Colossal-AI to )"
                         r"(?:DeepSpeed |Megatron-LM |Colossal-AI |PyTorch |torch )?(?:core_)?v?\d")
    wrong = []
    for entry in load_diagnostics().entries:
        for name in ("reading", "next_step", "follow_up"):
            text = getattr(entry, name) or ""
            outside = clauses.CLAUSE.sub(lambda m: "" if m.group(1) == "from" else m.group(0), text)
            if entry.since is None and upgrade.search(outside):
                wrong.append(f"{entry.id}.{name}: {upgrade.search(outside).group(0)!r}")  # type: ignore[union-attr]
    assert not wrong, "\n".join(wrong)
