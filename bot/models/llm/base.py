"""The chat-model interface (one method), its registry by name prefix, and the on-disk response cache."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bot.core.errors import ConfigError
from bot.core.settings import Settings

Message = dict[str, str]


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False


class ChatModel(Protocol):
    """Anything that answers a list of chat messages; `schema` asks for JSON matching it where supported."""

    model_id: str

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None, max_tokens: int
                 ) -> Completion: ...


ChatFactory = Callable[[str, Settings], ChatModel]
_BACKENDS: dict[str, ChatFactory] = {}


def register_backend(prefix: str) -> Callable[[ChatFactory], ChatFactory]:
    def decorate(factory: ChatFactory) -> ChatFactory:
        _BACKENDS[prefix] = factory
        return factory
    return decorate


def make_chat_model(spec: str | None, settings: Settings) -> ChatModel:
    """`openai:<model>` (any OpenAI-compatible server) or `local:<dir or .gguf>` (transformers)."""
    from bot.models.llm import local_transformers, openai_chat  # noqa: F401  (registers the backends)

    if not spec:
        raise ConfigError("the llm predictor needs a model: set DDL_TRIAGE_LLM=openai:<model> (with "
                          "DDL_TRIAGE_LLM_BASE_URL / DDL_TRIAGE_LLM_API_KEY) or DDL_TRIAGE_LLM=local:<path>")
    prefix, _, rest = spec.partition(":")
    if prefix not in _BACKENDS or not rest:
        raise ConfigError(f"DDL_TRIAGE_LLM={spec!r} is not understood; use one of "
                          f"{[p + ':<...>' for p in sorted(_BACKENDS)]}")
    return _BACKENDS[prefix](rest, settings)


class ResponseCache:
    """Completions keyed by a hash of model, messages and options: re-scoring costs nothing."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS completion (key TEXT PRIMARY KEY, text TEXT, "
                         "prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL)")

    @staticmethod
    def key(model_id: str, messages: list[Message], options: dict[str, Any]) -> str:
        blob = json.dumps({"model": model_id, "messages": messages, "options": options}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT text, prompt_tokens, completion_tokens, latency_s FROM completion "
                                   "WHERE key = ?", (key,)).fetchone()
        return Completion(row[0], row[1], row[2], row[3], cached=True) if row else None

    def put(self, key: str, completion: Completion) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO completion VALUES (?, ?, ?, ?, ?)",
                             (key, completion.text, completion.prompt_tokens, completion.completion_tokens,
                              completion.latency_s))
