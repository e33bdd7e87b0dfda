"""The durable job queue: deliveries and jobs in the service database (`store.py`, the database's one handle),
leases, the worker loop, recovery of missed deliveries and housekeeping. Decisions and corrections live in
`bot/service/decisions/`, GitHub write pacing in `bot/service/github/pacing.py`, retention in
`bot/service/retention/`."""
