"""LLM predictor (placeholder)."""
