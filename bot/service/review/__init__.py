"""The review page (`/review`): maintainers read, post, correct and rate the bot's decisions."""
