"""The command line (`ddl-triage`): the typer app in `main`, and its command groups (`config`, `memory`, `pack`,
`service`)."""
