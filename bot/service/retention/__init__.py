"""Retention and erasure, in one place: what the service database keeps, for how long, and what an uninstall,
a deleted issue or a disabled repository removes (`policy.RETENTION` is the table; `prune` ages rows out,
`erasure` removes them on request). Every removal runs in small transactions, so intake never waits long."""
