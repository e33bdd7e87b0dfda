"""What a job does, one module per concern (bedevere-style routers): triage, `/triage` commands and
corrections, installation events and the issue lifecycle that keep the repository memory current."""
