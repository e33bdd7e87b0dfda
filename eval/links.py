"""Cross-references between records, so that linked threads share a fold (they live in bot/models/grouping.py, where
the engine's calibration uses them too).

A fix pull request and the issue it fixes, the same change opened against two branches, a thread quoting
another by `#N` or by URL, and threads with the same title are one discussion seen twice: if one of them
trains the model and the other tests it, the test is not held out. Near-duplicate grouping by embedding
similarity misses them (a PR's text differs from its issue's).
"""

from __future__ import annotations

from bot.models.grouping import MIN_TITLE_CHARS, Key, linked_pairs, references, thread_key, title_key

__all__ = ["MIN_TITLE_CHARS", "Key", "linked_pairs", "references", "thread_key", "title_key"]
