"""The durable job queue: deliveries and jobs in the service database, leases, the worker loop, recovery of
missed deliveries, write pacing and housekeeping."""
