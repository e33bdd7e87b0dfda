"""The shipped default on the boundaries maintainers corrected most (issue #16): a question or a request is not
a bug report, and where the traceback stops says the stage. Real engine, real gold case base; the reports are
written for these tests."""

from __future__ import annotations

import pytest

from bot.core.domain import Issue
from bot.models.engine import Engine
from tests.test_stages import DEEPSPEED_CONFIG_ASSERT, MEGATRON_SHAPE_IN_STEP

QUESTION = Issue(id="q#1", title="How to set different learning rates for the embedding and the other layers?",
                 body="I train a 7B model with ZeRO-2. Is there a way to give the embedding layer its own learning "
                      "rate through the DeepSpeed config, or do I have to build the parameter groups myself?")
REQUEST = Issue(id="f#1", title="[FEATURE] Muon optimizer for ZeRO-3",
                body="**Is your feature request related to a problem? Please describe.**\nMuon is not available "
                     "with ZeRO-3 partitioned parameters.\n\n**Describe the solution you'd like**\nA Muon optimizer "
                     "that works on the partitioned fp32 master weights.\n")


def top(engine: Engine, issue: Issue, axis: str) -> str:
    return engine.triage(issue).predictions[axis].top[0][0]


@pytest.mark.parametrize(("issue", "kind"), [(QUESTION, "usage_question"), (REQUEST, "feature_request")],
                         ids=["how-to question", "feature template"])
def test_a_question_or_a_request_is_not_called_a_bug_report(engine: Engine, issue: Issue, kind: str) -> None:
    assert top(engine, issue, "kind") == kind


def test_a_config_assertion_raised_inside_initialize_is_data_and_model_preparation(engine: Engine) -> None:
    issue = Issue(id="b#1", title="AssertionError when starting ZeRO-2 fine-tuning on 2 nodes",
                  body=f"Launching with the deepspeed launcher fails right away:\n```\n{DEEPSPEED_CONFIG_ASSERT}```")
    assert top(engine, issue, "stage") == "data_model_preparation"


def test_a_shape_error_inside_the_training_step_is_training(engine: Engine) -> None:
    issue = Issue(id="b#2", title="RuntimeError in rotary embedding with sequence parallel",
                  body=f"Pretraining GPT with TP=2, SP on:\n```\n{MEGATRON_SHAPE_IN_STEP}```")
    assert top(engine, issue, "stage") == "training"
