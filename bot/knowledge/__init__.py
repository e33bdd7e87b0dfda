"""What the project knows: the taxonomy, the diagnostics knowledge base, the failure's stages, the facts a
failure needs (`facts`), the prompts and the labelled data set."""
