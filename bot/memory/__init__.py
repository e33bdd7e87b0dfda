"""Repository memory: each installed repository's own issues, synced, kept live and searched per repository."""
