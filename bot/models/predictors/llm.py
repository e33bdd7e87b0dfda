"""The `llm` predictor: a chat model reads the taxonomy, the nearest labelled cases and the issue.

Its JSON answer is accepted only with taxonomy ids; an invalid answer gets one retry, then the `linear`
predictor answers and the fallback is recorded.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bot.core.errors import LLMOutputError, PredictorError
from bot.core.settings import AXES, Settings
from bot.knowledge.prompts import PromptTemplate, load_prompt
from bot.knowledge.taxonomy import Taxonomy
from bot.models.llm.base import ChatModel, Completion, Message, ResponseCache, make_chat_model
from bot.models.predictors.base import (
    AxisDistributions,
    PredictionRecord,
    Predictor,
    Query,
    TrainingSet,
    normalise_distribution,
    register,
)
from bot.models.predictors.linear import LinearPredictor

LLM_WEIGHT = 0.75  # the LLM's label dominates; the fallback's ranking fills the rest of `top`
MAX_ISSUE_CHARS = 3500
PROMPT_NEIGHBOURS = 5


def answer_model(taxonomy: Taxonomy) -> type[BaseModel]:
    """A pydantic model that accepts only taxonomy ids, one per axis, and no other keys."""
    fields: dict[str, Any] = {axis: (Literal[taxonomy.predictable(axis)], ...) for axis in AXES}
    return create_model("TriageAnswer", __config__=ConfigDict(extra="forbid"), **fields)


def parse_answer(text: str, model: type[BaseModel]) -> dict[str, str]:
    """The labels of a JSON answer (code fences and chatter around it tolerated), or LLMOutputError."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise LLMOutputError("no JSON object in the answer")
    try:
        raw = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"invalid JSON ({exc.msg})") from None
    try:
        return {k: str(v) for k, v in model.model_validate(raw).model_dump().items()}
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg'][:80]}" for e in exc.errors())
        raise LLMOutputError(f"outside the taxonomy ({problems})") from None


def fence(text: str) -> str:
    """Untrusted text cannot close the fence or fake the end marker."""
    return text.replace("<<<", "‹‹‹").replace(">>>", "›››").replace("```", "'''")


class LLMPredictor(Predictor):
    name = "llm"
    cacheable = False

    def __init__(self, chat: ChatModel, fallback: Predictor, prompt: PromptTemplate, cache: ResponseCache | None,
                 max_tokens: int = 200) -> None:
        self.chat, self.fallback, self.prompt, self.cache = chat, fallback, prompt, cache
        self.max_tokens = max_tokens
        self.usage: dict[str, float] = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                        "latency_s": 0.0, "fallbacks": 0, "retries": 0}


    def fit(self, data: TrainingSet) -> None:
        self.fallback.fit(data)
        self.prepare(data)

    def prepare(self, data: TrainingSet) -> None:
        """Everything but fitting the fallback: the case base, the answer schema, the taxonomy text."""
        self._data = data
        self._answer = answer_model(data.taxonomy)
        self._schema = self._answer.model_json_schema()
        self._taxonomy_text = describe_taxonomy(data.taxonomy)

    def bind(self, data: TrainingSet) -> None:
        self.fallback.bind(data)
        self.prepare(data)

    def packed_part(self) -> Predictor | None:
        return self.fallback.packed_part()

    def calibration_proxy(self) -> Predictor:
        # Calibrating by cross-validation would call the LLM on the whole case base; the fallback stands in.
        return self.fallback

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return [record.distributions for record in self.predict_records(queries)]

    def predict_records(self, queries: list[Query]) -> list[PredictionRecord]:
        """The LLM's labels blended into the fallback's ranking; where the LLM fails, the fallback's own answer.

        The calibrator was fitted on the fallback's scores, so the score to calibrate is the fallback's: its
        probability for the LLM's label (agreement keeps the fallback's confidence, a label it found unlikely
        gets a low one and the axis abstains), and on a fallback its plain top probability, so that a fallback
        answer carries exactly the confidence the fallback alone would give.
        """
        out: list[PredictionRecord] = []
        for query, dist in zip(queries, self.fallback.predict_proba(queries), strict=True):
            try:
                labels = self._ask(query)
            except (LLMOutputError, PredictorError) as exc:
                self.usage["fallbacks"] += 1
                out.append(replace(PredictionRecord.plain(dist), fallback=f"{self.chat.model_id}: {exc}"))
                continue
            out.append(PredictionRecord({axis: self._mix(axis, labels[axis], dist[axis]) for axis in AXES}, None,
                                        {axis: dist[axis].get(labels[axis], 0.0) for axis in AXES}))
        return out

    def _mix(self, axis: str, label: str, fallback: dict[str, float]) -> dict[str, float]:
        scores = {k: (1 - LLM_WEIGHT) * p for k, p in fallback.items()}
        scores[label] = scores.get(label, 0.0) + LLM_WEIGHT
        return normalise_distribution(scores, self._data.taxonomy.predictable(axis))

    def _ask(self, query: Query) -> dict[str, str]:
        messages = self._messages(query)
        first = self._complete(messages)
        try:
            return parse_answer(first.text, self._answer)
        except LLMOutputError as exc:
            self.usage["retries"] += 1
            retry = self.prompt.render_retry(str(exc), ", ".join(AXES))
            second = self._complete([*messages, {"role": "assistant", "content": first.text[:2000]},
                                     {"role": "user", "content": retry}])
            try:
                return parse_answer(second.text, self._answer)
            except LLMOutputError as again:
                raise LLMOutputError(f"invalid answer twice: {again}") from None

    def _messages(self, query: Query) -> list[Message]:
        system, user = self.prompt.render(
            taxonomy=self._taxonomy_text, neighbours=self._neighbour_text(query),
            title=fence(query.issue.title[:300]), body=fence(query.issue.body[:MAX_ISSUE_CHARS]),
            answer_keys=", ".join(AXES))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _neighbour_text(self, query: Query) -> str:
        lines = []
        for j, score in query.hits[:PROMPT_NEIGHBOURS]:
            case = self._data.index.cases[j]
            labels = ", ".join(f"{a}={case.labels.get(a) or 'unknown'}" for a in AXES)
            lines.append(f"- {fence((case.title or case.id)[:150])} (similarity {score:.2f}): {labels}")
        return "\n".join(lines) or "- (none)"

    def _complete(self, messages: list[Message]) -> Completion:
        options = {"schema": self._schema, "max_tokens": self.max_tokens, "prompt": self.prompt.version}
        key = ResponseCache.key(self.chat.model_id, messages, options)
        cached = self.cache.get(key) if self.cache else None
        if cached is not None:
            self.usage["cache_hits"] += 1
            return cached
        completion = self.chat.complete(messages, schema=self._schema, max_tokens=self.max_tokens)
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += completion.prompt_tokens
        self.usage["completion_tokens"] += completion.completion_tokens
        self.usage["latency_s"] += completion.latency_s
        if self.cache:
            self.cache.put(key, completion)
        return completion

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "model": self.chat.model_id, "prompt": self.prompt.version,
                "fallback": self.fallback.describe(), "llm_weight": LLM_WEIGHT}


def describe_taxonomy(taxonomy: Taxonomy) -> str:
    """Each axis with its ids and definitions, as the prompt shows them."""
    blocks = []
    for axis in AXES:
        spec = taxonomy.axis(axis)
        values = [v for v in spec.values if v.id in taxonomy.predictable(axis)]
        blocks.append(f"{axis}: {spec.description}\n" + "\n".join(f"  - {v.id}: {v.definition}" for v in values))
    return "\n".join(blocks)


@register("llm")
def _llm(settings: Settings) -> Predictor:
    chat = make_chat_model(settings.llm, settings)
    return LLMPredictor(chat, LinearPredictor(), load_prompt("triage-v1"),
                        ResponseCache(settings.cache_dir / "llm-responses.sqlite3"), settings.llm_max_tokens)
