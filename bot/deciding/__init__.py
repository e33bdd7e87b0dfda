"""Deciding per repository: its config file, shadow mode and the decision of what the bot does with a triage
result there."""
