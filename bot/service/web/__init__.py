"""The web process: the app factory, the webhook's front door and intake, the operations pages."""
