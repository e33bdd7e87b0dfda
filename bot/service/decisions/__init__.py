"""What the bot decided per triage delivery (`Decision`, for audit, `/decisions` and the review page) and
maintainers' corrections: their tables and the queries the service's `Store` inherits."""
