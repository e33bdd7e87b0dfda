"""OpenAI-compatible chat completions: OpenAI, Azure, vLLM, Ollama, llama.cpp server, LM Studio."""

from __future__ import annotations

import time
from typing import Any

from bot.core.errors import ConfigError, PredictorError
from bot.core.settings import Settings
from bot.models.llm.base import ChatModel, Completion, Message, register_backend


class OpenAIChat:
    """Chat completions through the `openai` client, asking for JSON that matches a schema."""

    def __init__(self, model: str, base_url: str | None, api_key: str | None, timeout_s: float) -> None:
        import openai

        self.model_id = f"openai:{model}"
        self._model = model
        self._errors = (openai.APIError, openai.APIConnectionError, openai.APITimeoutError)
        # max_retries=0: one failed call is one recorded failure; the predictor decides what happens next.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None, max_tokens: int
                 ) -> Completion:
        options: dict[str, Any] = {"temperature": 0.0, "max_tokens": max_tokens}
        if schema is not None:
            options["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "triage", "schema": schema, "strict": True}}
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(model=self._model, messages=messages,  # type: ignore[arg-type]
                                                             **options)
        except self._errors as exc:
            raise PredictorError(f"{self.model_id}: request failed: {exc}") from None
        usage = response.usage
        return Completion(text=response.choices[0].message.content or "",
                          prompt_tokens=usage.prompt_tokens if usage else 0,
                          completion_tokens=usage.completion_tokens if usage else 0,
                          latency_s=time.perf_counter() - started)


@register_backend("openai")
def _openai(model: str, settings: Settings) -> ChatModel:
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if key is None and settings.llm_base_url is None:
        raise ConfigError("DDL_TRIAGE_LLM_API_KEY is not set: give the API key of the OpenAI-compatible server, "
                          "or DDL_TRIAGE_LLM_BASE_URL for a local server that needs none")
    return OpenAIChat(model, settings.llm_base_url, key or "not-needed", settings.llm_timeout_s)
