"""The shared kernel every stage uses: the domain types (`domain`), errors, settings, paths, secret redaction
(`redaction`) and the database primitives (`storage/`). It imports nothing else of `bot`."""
