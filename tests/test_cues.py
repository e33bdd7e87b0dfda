"""Title and template cues, and the template headings the normaliser drops from the embedded text."""

from __future__ import annotations

import numpy as np

from bot.core.domain import Issue
from bot.reading.cues import CUE_NAMES, cue_flags, template_heading, title_cues
from bot.reading.normalise import normalise

FEATURE_FORM = """### Describe the feature

Pipeline parallelism with an uneven number of layers per stage, e.g. 30 layers on 4 stages.

### Additional context

We train a 30-layer model on 4 nodes.
"""

DEEPSPEED_FEATURE = """**Is your feature request related to a problem? Please describe.**
ZeRO-3 cannot gather parameters read-only, so every access re-partitions them.

**Describe the solution you'd like**
A read_only flag on GatheredParameters.
"""

MEGATRON_QUESTION = """**Your question**
Ask a clear and concise question about Megatron-LM.
Does the distributed optimizer shard the fp32 master weights across data-parallel ranks?
"""


def test_question_words_and_tags_of_titles_are_cues() -> None:
    assert {"how_to", "question_mark"} <= title_cues("How to resume training from a ZeRO-3 checkpoint?")
    assert "wh_start" in title_cues("Why does rank 0 use more GPU memory than the other ranks")
    assert {"tag_question", "is_it_possible"} <= title_cues("[QUESTION] Is it possible to use TP=2 with MoE")
    assert "tag_feature" in title_cues("[FEATURE]: support llama in shardformer")
    assert "tag_feature" in title_cues("[REQUEST] Autocast for BF16")
    assert {"tag_docs", "docs_word"} <= title_cues("[DOC]: typo in the README of the chat example")
    assert "fix_prefix" in title_cues("fix: rotary embedding missing argument")
    assert title_cues("[BUG] NCCL watchdog timeout during allreduce") == {"tag_bug"}


def test_template_headings_are_recognised_by_their_template() -> None:
    assert template_heading("### 🐛 Describe the bug") == "bug"
    assert template_heading("**To Reproduce**") == "bug"
    assert template_heading("**System info (please complete the following information):**") == "bug"
    assert template_heading("**Is your feature request related to a problem? Please describe.**") == "feature"
    assert template_heading("### 📚 The doc issue") == "docs"
    assert template_heading("# What does this PR do ?") == "pull_request"
    assert template_heading("**Additional context**") == ""  # every template has it: dropped, no cue
    assert template_heading("Traceback (most recent call last):") is None
    assert template_heading("RuntimeError: CUDA error: an illegal memory access was encountered") is None


def test_template_headings_leave_the_embedded_text_and_become_cues() -> None:
    for body, kind in ((FEATURE_FORM, "feature"), (DEEPSPEED_FEATURE, "feature"), (MEGATRON_QUESTION, "question")):
        issue = normalise(Issue(title="t", body=body))
        assert issue.templates == (kind,)
        assert "Describe" not in issue.text and "Your question" not in issue.text and "Additional" not in issue.text
    kept = normalise(Issue(title="t", body=MEGATRON_QUESTION)).text
    assert "Does the distributed optimizer shard" in kept and "clear and concise" not in kept


def test_cue_flags_put_each_cue_in_its_own_column() -> None:
    flags = cue_flags(["How to set up fp8 training?", "[BUG] hang at step 3", "Pipeline stages"],
                      [("question",), ("bug",), ()],
                      ["", "The job stops after the first allreduce.", "Is there a way to split 30 layers unevenly?"])
    named = [{CUE_NAMES[j] for j in np.flatnonzero(row)} for row in flags]
    assert named == [{"how_to", "question_mark", "template_question"}, {"tag_bug", "template_bug"},
                     {"body_question"}]
