"""The models: predictors, the LLM clients, embeddings, retrieval, calibration and abstention (`policy`), the
engine that triages an issue and the pack that ships it fitted."""
