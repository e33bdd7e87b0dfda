"""The GitHub App webhook service: intake, a durable job queue, a worker and GitHub access."""
