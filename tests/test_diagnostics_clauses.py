"""Clauses of a knowledge-base text that hold for some frameworks or from a day (bot/knowledge/clauses.py): how they
read, how a broken one is reported, and that no shipped text shows an issue another framework's API or a release
that had not shipped on the day it was opened."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date, timedelta
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
    adjacent = "a <only DeepSpeed>b</only> <only Megatron-LM>c</only> d"
    assert clauses.render(adjacent, "Colossal-AI", None) == "a d"
    assert clauses.render(adjacent, "Megatron-LM", None) == "a c d"
    unchanged = "No clause here:  two spaces stay ."
    assert clauses.render(unchanged, "DeepSpeed", None) == unchanged


@pytest.mark.parametrize(("framework", "opened", "expected"), [
    ("Megatron-LM", date(2022, 3, 4), "Profile it. With `--timers`, or `--timing-log-level 2`, read the slowest."),
    ("Megatron-LM", date(2022, 3, 3), "Profile it. With `--timers`, read the slowest."),
    ("Megatron-LM", None, "Profile it. With `--timers`, or `--timing-log-level 2`, read the slowest."),
    ("DeepSpeed", date(2022, 3, 4), "Profile it. Upgrade to 0.9."),
    ("DeepSpeed", date(2022, 3, 3), "Profile it."),
    (None, None, "Profile it."),
])
def test_clauses_nest(framework: str | None, opened: date | None, expected: str) -> None:
    """A framework's flag that came in a release: `<from DAY>` inside `<only X>` (and the other way round)."""
    text = ("Profile it.<only Megatron-LM> With `--timers`<from 2022-03-04>, or `--timing-log-level 2`</from>, read "
            "the slowest.</only><from 2022-03-04><only DeepSpeed> Upgrade to 0.9.</only></from>")
    assert clauses.check(text, FRAMEWORKS) == text
    assert clauses.only_frameworks(text) == {"Megatron-LM", "DeepSpeed"}
    assert (None, date(2022, 3, 3)) in set(clauses.occasions(text, FRAMEWORKS))
    assert clauses.render(text, framework, opened) == expected


def test_a_body_may_hold_what_looks_like_the_start_of_a_tag() -> None:
    """Code such as `x<from` or `a<b` inside a clause is text, not a tag."""
    text = "Check it<only DeepSpeed> with `if x<before y` and `a<b`</only>."
    assert clauses.check(text, FRAMEWORKS) == text
    assert clauses.render(text, "DeepSpeed", None) == "Check it with `if x<before y` and `a<b`."
    assert clauses.render(text, "Megatron-LM", None) == "Check it."
    assert clauses.render("a <only\tDeepSpeed>b</only> c", "DeepSpeed", None) == "a b c"  # the tag as check reads it


@pytest.mark.parametrize(("opened", "expected"), [
    (date(2022, 7, 30), "Cast the inputs."),
    (date(2022, 7, 31), "Cast the inputs. With DeepSpeed, `auto_cast` casts token ids: set it to false."),
    (date(2024, 10, 22), "Cast the inputs. With DeepSpeed before 0.15.3, `auto_cast` casts token ids: set it to false "
                         "or upgrade to 0.15.3."),
])
def test_a_day_inside_a_day(opened: date, expected: str) -> None:
    """An upgrade named only once it shipped, inside a setting that itself came in a release."""
    text = ("Cast the inputs.<only DeepSpeed><from 2022-07-31> With DeepSpeed<from 2024-10-22> before 0.15.3</from>, "
            "`auto_cast` casts token ids: set it to false<from 2024-10-22> or upgrade to 0.15.3</from>.</from></only>")
    assert clauses.check(text, FRAMEWORKS) == text
    assert clauses.render(text, "DeepSpeed", opened) == expected
    assert clauses.render(text, "Megatron-LM", opened) == "Cast the inputs."


@pytest.mark.parametrize(("text", "message"), [
    ("a <only TensorFlowLite>b</only>", r"\['TensorFlowLite'\] not among the frameworks"),
    ("a <only DeepSpeed>b <from 2023-01-01>c <only Megatron-LM>d</only></from></only>", "inside another `only`"),
    ("a <from 2023-06-01><before 2023-01-01>b</before></from> c", r"<before 2023-01-01>: never shown"),
    ("a <only DeepSpeed>b <from 2023-01-01>c</only></from>", "a clause tag without its pair"),
    ("a <only>b</only>", "a clause names its framework or day"),
    ("a <only DeepSpeed><from 2023-01-01> </from></only>", "an empty clause"),
    ("a <only DeepSpeed>b <from 2023-01-01>c</from> <from 2023-01-0x>d</from></only>", "a clause's day is"),
    ("a <only DeepSpeed>b", "a clause tag without its pair"),
    ("a <from 2023-01-01>b</before>", "a clause tag without its pair"),
    ("a <from someday>b</from>", "a clause's day is YYYY-MM-DD"),
    ("a <only DeepSpeed> </only>", "an empty clause"),
    ("<before 2023-01-01>only before</before>", "says nothing for framework None on None"),
    ("<only DeepSpeed>DeepSpeed only</only>", "says nothing for framework None"),
    ("run (<only DeepSpeed>x</only>, y)", r"for framework None on None it reads 'run \(, y\)': a removed clause"),
    ("a,<only DeepSpeed> b</only>, c", "leaves stray spaces or punctuation"),
    ("a <from 20240105>b</from>", "a clause's day is YYYY-MM-DD"),
    ("a\x00b", "a NUL character"),
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


def test_a_framework_s_own_text_may_hold_clauses_for_that_framework_alone(tmp_path: Path) -> None:
    own = {"DeepSpeed": {"next_step": "<only DeepSpeed>Own step</only><from 2024-01-01> (from 1.0)</from>."}}
    base = load_diagnostics_file(_base(tmp_path, by_framework=own))
    [found] = diagnose("", "made-up failure", framework="DeepSpeed", kind="bug_report", base=base,
                       opened=date(2023, 12, 31))
    assert found.next_step == "Own step."


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
    ({"next_step": "Step<only DeepSpeed> with `engine`</only>.", "by_framework": {"DeepSpeed": {"next_step": "Own."}}},
     "next_step", r"an `<only DeepSpeed>` clause is never read: `by_framework.DeepSpeed.next_step` replaces"),
])
def test_a_broken_clause_in_the_file_names_the_entry_and_the_field(
        tmp_path: Path, fields: dict[str, object], where: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"entry 'made_up' \(entries\[0\]\).*{where}.*{message}"):
        load_diagnostics_file(_base(tmp_path, **fields))


# Each framework's own flags and APIs. A text shown on one framework's issues names another's only where the entry's
# own patterns do: the error line itself is the other framework's (Accelerate reading a DeepSpeed config). Colossal-AI
# has a `get_accelerator` too (colossalai.accelerator, from 0.3.5): spelled out, it is not DeepSpeed's.
API = {
    "DeepSpeed": r"deepspeed\.[a-z_]|\bds_config\b|ds_report|zero_optimization|\"offload_optimizer\"|~/\.deepspeed_env"
                 r"|(?<!colossalai\.accelerator\.)get_accelerator|`deepspeed[ `]|DS_BUILD_|\"(?:bf16|fp16)\": \{"
                 r"|stage3_|train_micro_batch_size_per_gpu|--deepspeed\b|engine\.backward|wall_clock_breakdown"
                 r"|zero_allow_untested_optimizer",
    "Megatron-LM": r"--tensor-model-parallel|--pipeline-model-parallel|--use-flash-attn|--recompute-|--fp8-format"
                   r"|--attention-backend|--sequence-parallel|megatron/|pretrain_gpt|--micro-batch-size"
                   r"|--global-batch-size|--transformer-impl|\bmpu\.|--use-mcore|megatron\.core|--seq-length"
                   r"|--tokenizer-type|fused_kernels|--timing-log-level|--hidden-dropout|--attention-dropout",
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
        # Each framework the entry speaks to, and for an entry of any framework the general text alone (an issue of
        # another or an unknown framework), which names no framework's API.
        speaks_to: list[str | None] = [*sorted(set(entry.frameworks or FRAMEWORKS) & FRAMEWORKS)]
        for framework in speaks_to + ([] if entry.frameworks else [None]):
            own = entry.by_framework.get(framework or "")
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


# "Upgrade to 0.8.1", "update Megatron-LM to core_v0.8.0", "upgrade Accelerate to 1.9.0", "upgrade flash-attn (2.5.5".
UPGRADE = re.compile(r"\b[Uu]p(?:grade|date)\b[^.;:()]{0,40}?\bto "
                     r"(?:(?:DeepSpeed|Megatron-LM|Colossal-AI|PyTorch|torch) )?(?:core_)?v?\d+\.\d+"
                     r"|\b[Uu]p(?:grade|date) [\w-]+ \(\d+\.\d+")


@pytest.mark.parametrize("text", ["Upgrade to DeepSpeed 0.4.0 or later", "update Megatron-LM to core_v0.8.0",
                                  "upgrade Accelerate to 1.9.0 or later", "or upgrade flash-attn (2.5.5 and later"])
def test_the_release_pattern_sees_each_way_of_naming_an_upgrade(text: str) -> None:
    assert UPGRADE.search(text)
    assert not UPGRADE.search("update the config to set `stage` 3")


def test_no_shipped_text_names_a_release_before_the_issue_could_have_it() -> None:
    """A text that says "upgrade to X" holds it in a `<from DAY>` clause (or the entry is dated `since`, the failure
    itself not older than X), so an issue opened before X shipped is not told to install it."""
    wrong = []
    for entry in load_diagnostics().entries:
        texts = [(name, getattr(entry, name)) for name in ("reading", "next_step", "follow_up")]
        texts += [(f"by_framework.{f}.{name}", getattr(own, name)) for f, own in entry.by_framework.items()
                  for name in ("reading", "next_step", "follow_up")]
        for name, text in texts:
            outside = text or ""  # the text with its `from` clauses removed and every other clause's tags
            while (inner := clauses.CLAUSE.sub(lambda m: "" if m.group(1) == "from" else m.group(3), outside)) \
                    != outside:
                outside = inner
            if entry.since is None and (found := UPGRADE.search(outside)):
                wrong.append(f"{entry.id}.{name}: {found.group(0)!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("opened", "named", "not_named"), [
    (date(2023, 6, 1), "the default `--transformer-impl local`", "core_v0.4.0"),
    (date(2024, 2, 22), "any release before core_v0.4.0", "core_v0.8.0"),
    (date(2024, 7, 20), "44d581c302", "core_v0.8.0"),
    (date(2024, 9, 1), "core_v0.8.0 or later", "44d581c302"),
])
def test_a_megatron_release_is_named_only_once_it_shipped(opened: date, named: str, not_named: str) -> None:
    """core_v0.4.0 shipped on 2023-12-11 and core_v0.8.0 on 2024-08-12 (the tags' dates); before, the way to train
    without Transformer Engine is that day's: the default, or the main branch that made it optional."""
    entry = load_diagnostics().entry("transformer_engine_missing")
    shown = clauses.render(entry.next_step, "Megatron-LM", opened)
    assert named in shown and not_named not in shown
    reading = clauses.render(load_diagnostics().entry("megatron_core_te_required_before_0_8").reading, "Megatron-LM",
                             opened)
    assert ("core_v0.8.0" in reading) == (opened >= date(2024, 8, 12))


# Megatron-Core's releases and the days they shipped (the tags' dates in NVIDIA/Megatron-LM).
MEGATRON_CORE_RELEASES = {
    4: date(2023, 12, 11), 5: date(2024, 2, 26), 6: date(2024, 4, 18), 7: date(2024, 5, 30), 8: date(2024, 8, 12),
    9: date(2024, 10, 24), 10: date(2025, 2, 17), 11: date(2025, 3, 14), 12: date(2025, 5, 6), 13: date(2025, 7, 25),
    14: date(2025, 10, 8), 15: date(2025, 12, 5), 16: date(2026, 2, 26), 17: date(2026, 4, 14), 18: date(2026, 6, 22),
    19: date(2026, 8, 19),
}
# A release named as where something starts: "from core_v0.4.0", "since core_v0.9.0", "core_v0.15+", "or later".
RELEASE_START = re.compile(r"\b(?:from|since) core_v0\.(\d+)(?:\.\d+)?|\bcore_v0\.(\d+)(?:\.\d+)?(?:\+| or later)")


def _offered_before_shipped(framework: str, release_days: Iterable[date], pattern: re.Pattern[str],
                            shipped: Callable[[re.Match[str]], date | None]) -> set[str]:
    """The texts a framework's issues read that name one of its releases as where something starts, on a day before
    that release shipped: read on the eve of every release and on each side of every day a clause names."""
    probes = {day - timedelta(days=1) for day in release_days}
    wrong = set()
    for entry in load_diagnostics().entries:
        if entry.frameworks and framework not in entry.frameworks:
            continue
        own = entry.by_framework.get(framework)
        for name in ("reading", "next_step", "follow_up"):
            text = (own and getattr(own, name)) or getattr(entry, name)
            if not text:
                continue
            days = probes | {day for _, day in clauses.occasions(text, KNOWN_FRAMEWORKS) if day}
            for opened in sorted(day for day in days if not entry.since or day >= entry.since):
                for m in pattern.finditer(clauses.render(text, framework, opened)):
                    day = shipped(m)
                    if day and opened < day:
                        wrong.add(f"{entry.id}.{name} on {opened}: {m.group(0)!r}")
    return wrong


def test_no_shipped_text_offers_a_megatron_core_release_before_it_shipped() -> None:
    """A flag or a file "from core_v0.X" is offered only to issues opened once that release had shipped. Naming a later
    release as a boundary ("`megatron/data` before core_v0.4.0") stays allowed."""
    wrong = _offered_before_shipped("Megatron-LM", MEGATRON_CORE_RELEASES.values(), RELEASE_START,
                                    lambda m: MEGATRON_CORE_RELEASES[int(m.group(1) or m.group(2))])
    assert not wrong, "\n".join(sorted(wrong))


@pytest.mark.parametrize("text", ["`--context-parallel-size`, from core_v0.4.0", "the default since core_v0.9.0",
                                  "(core_v0.15+) save one checkpoint",
                                  "`--transformer-impl local` on core_v0.8.0 or later"])
def test_the_release_start_pattern_sees_each_way_of_naming_where_something_starts(text: str) -> None:
    assert RELEASE_START.search(text)
    assert not RELEASE_START.search("(`megatron/data` before core_v0.4.0)")


# DeepSpeed's releases and the days they shipped (the tags' dates in deepspeedai/DeepSpeed, v0.1.0 to v0.19.5).
DEEPSPEED_RELEASES = {version: date.fromisoformat(day) for version, day in {
    "0.1.0": "2020-05-18", "0.2.0": "2020-06-11", "0.3.0": "2020-09-10", "0.3.1": "2020-11-12",
    "0.3.2": "2020-11-14", "0.3.3": "2020-11-19", "0.3.4": "2020-11-19", "0.3.5": "2020-11-23",
    "0.3.6": "2020-11-25", "0.3.7": "2020-11-25", "0.3.8": "2020-12-09", "0.3.9": "2020-12-22",
    "0.3.10": "2021-01-08", "0.3.11": "2021-02-02", "0.3.12": "2021-03-12", "0.3.13": "2021-03-16",
    "0.3.14": "2021-04-08", "0.3.15": "2021-04-19", "0.3.16": "2021-04-29", "0.4.0": "2021-06-08",
    "0.4.1": "2021-06-21", "0.4.2": "2021-06-28", "0.4.3": "2021-07-12", "0.4.4": "2021-07-29",
    "0.4.5": "2021-08-06", "0.5.0": "2021-08-17", "0.5.1": "2021-08-26", "0.5.2": "2021-09-13",
    "0.5.3": "2021-09-16", "0.5.4": "2021-10-06", "0.5.5": "2021-11-02", "0.5.6": "2021-11-11",
    "0.5.7": "2021-11-19", "0.5.8": "2021-11-30", "0.5.9": "2022-01-03", "0.5.10": "2022-01-14",
    "0.6.0": "2022-03-07", "0.6.1": "2022-03-23", "0.6.2": "2022-04-25", "0.6.3": "2022-04-26",
    "0.6.4": "2022-05-06", "0.6.5": "2022-05-24", "0.6.6": "2022-07-13", "0.6.7": "2022-07-19",
    "0.7.0": "2022-08-01", "0.7.1": "2022-08-23", "0.7.2": "2022-08-25", "0.7.3": "2022-09-16",
    "0.7.4": "2022-10-21", "0.7.5": "2022-11-13", "0.7.6": "2022-11-30", "0.7.7": "2022-12-09",
    "0.8.0": "2023-01-17", "0.8.1": "2023-02-17", "0.8.2": "2023-03-07", "0.8.3": "2023-03-17",
    "0.9.0": "2023-04-12", "0.9.1": "2023-04-20", "0.9.2": "2023-05-03", "0.9.3": "2023-06-02",
    "0.9.4": "2023-06-09", "0.9.5": "2023-06-22", "0.10.0": "2023-07-17", "0.10.1": "2023-08-18",
    "0.10.2": "2023-08-31", "0.10.3": "2023-09-11", "0.11.0": "2023-10-06", "0.11.1": "2023-10-09",
    "0.11.2": "2023-10-31", "0.12.0": "2023-11-03", "0.12.1": "2023-11-03", "0.12.2": "2023-11-03",
    "0.12.3": "2023-11-10", "0.12.4": "2023-11-30", "0.12.5": "2023-12-15", "0.12.6": "2023-12-20",
    "0.13.0": "2024-01-19", "0.13.1": "2024-01-23", "0.13.2": "2024-02-10", "0.13.3": "2024-02-23",
    "0.13.4": "2024-02-26", "0.13.5": "2024-03-05", "0.14.0": "2024-03-07", "0.14.1": "2024-04-15",
    "0.14.2": "2024-04-23", "0.14.3": "2024-06-12", "0.14.4": "2024-06-20", "0.14.5": "2024-08-15",
    "0.15.0": "2024-08-22", "0.15.1": "2024-09-04", "0.15.2": "2024-10-09", "0.15.3": "2024-10-22",
    "0.15.4": "2024-11-06", "0.16.0": "2024-11-25", "0.16.1": "2024-12-05", "0.16.2": "2024-12-18",
    "0.16.3": "2025-01-21", "0.16.4": "2025-02-20", "0.16.5": "2025-03-27", "0.16.6": "2025-04-16",
    "0.16.7": "2025-04-18", "0.16.8": "2025-05-19", "0.16.9": "2025-05-22", "0.17.0": "2025-06-02",
    "0.17.1": "2025-06-09", "0.17.2": "2025-07-06", "0.17.3": "2025-07-26", "0.17.4": "2025-07-31",
    "0.17.5": "2025-08-19", "0.17.6": "2025-09-19", "0.18.0": "2025-10-07", "0.18.1": "2025-10-23",
    "0.18.2": "2025-11-04", "0.18.3": "2025-12-09", "0.18.4": "2026-01-07", "0.18.5": "2026-01-29",
    "0.18.6": "2026-02-12", "0.18.7": "2026-03-05", "0.18.8": "2026-03-13", "0.18.9": "2026-03-30",
    "0.19.0": "2026-05-06", "0.19.1": "2026-05-25", "0.19.2": "2026-06-16", "0.19.3": "2026-07-22",
    "0.19.4": "2026-08-06", "0.19.5": "2026-08-09",
}.items()}
# Colossal-AI's releases and the days they shipped (the tags' dates in hpcaitech/ColossalAI, v0.0.2 to v0.5.1).
COLOSSALAI_RELEASES = {version: date.fromisoformat(day) for version, day in {
    "0.0.2": "2022-02-15", "0.1.0": "2022-03-18", "0.1.1": "2022-03-26", "0.1.2": "2022-04-06",
    "0.1.3": "2022-04-16", "0.1.4": "2022-04-28", "0.1.5": "2022-05-17", "0.1.6": "2022-06-02",
    "0.1.7": "2022-06-21", "0.1.8": "2022-07-13", "0.1.9": "2022-08-11", "0.1.10": "2022-09-08",
    "0.1.12": "2022-12-09", "0.1.13": "2022-12-20", "0.2.0": "2023-01-03", "0.2.1": "2023-02-06",
    "0.2.2": "2023-02-10", "0.2.3": "2023-02-13", "0.2.4": "2023-02-14", "0.2.5": "2023-02-15",
    "0.2.6": "2023-03-10", "0.2.7": "2023-03-10", "0.2.8": "2023-03-29", "0.3.0": "2023-05-25",
    "0.3.1": "2023-08-01", "0.3.2": "2023-09-06", "0.3.3": "2023-09-22", "0.3.4": "2023-11-01",
    "0.3.5": "2024-02-08", "0.3.6": "2024-03-07", "0.3.7": "2024-04-27", "0.3.8": "2024-05-31",
    "0.3.9": "2024-06-20", "0.4.0": "2024-06-28", "0.4.1": "2024-07-17", "0.4.2": "2024-07-31",
    "0.4.3": "2024-09-10", "0.4.4": "2024-09-19", "0.4.5": "2024-10-21", "0.4.6": "2024-11-04",
    "0.4.7": "2025-01-03", "0.4.8": "2025-02-20", "0.4.9": "2025-03-03", "0.5.0": "2025-05-28",
    "0.5.1": "2025-06-02",
}.items()}
# "from 0.14.5", "since 0.16.0", "DeepSpeed 0.12.0 and later", "(0.10.3)", "(0.3.8+)"; a version that is no release of
# the framework (another package's) is not read.
RELEASE_OF = re.compile(r"(?i)\b(?:from|since|in) (?:DeepSpeed |Colossal-AI )?v?(0\.\d+\.\d+)\b"
                        r"|\b(?:DeepSpeed |Colossal-AI )?v?(0\.\d+\.\d+)(?:\+| or later| and later)|\((0\.\d+\.\d+)\)")


@pytest.mark.parametrize(("framework", "releases"), [("DeepSpeed", DEEPSPEED_RELEASES),
                                                     ("Colossal-AI", COLOSSALAI_RELEASES)])
def test_no_shipped_text_offers_a_release_before_it_shipped(framework: str, releases: dict[str, date]) -> None:
    """What a framework's issues read names one of its releases as where something starts only once that release had
    shipped."""
    wrong = _offered_before_shipped(framework, releases.values(), RELEASE_OF,
                                    lambda m: releases.get(m.group(1) or m.group(2) or m.group(3)))
    assert not wrong, "\n".join(sorted(wrong))
