from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.knowledge.prompts import PromptTemplate, load_prompt


@pytest.mark.parametrize("path", sorted(shipped_dir("prompts").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_prompt_loads(path: Path) -> None:
    assert load_prompt(str(path)).variables


def test_rendering_names_every_missing_variable() -> None:
    prompt = load_prompt("triage-v1")
    with pytest.raises(ConfigError, match=r"missing variables \['body', 'neighbours'"):
        prompt.render(taxonomy="t", title="x", answer_keys="k")


def test_a_placeholder_not_declared_is_rejected_on_load() -> None:
    with pytest.raises(ValueError, match="placeholders"):
        PromptTemplate(version="x", variables=("a",), system="$a", user="$a $b", retry="$error")
