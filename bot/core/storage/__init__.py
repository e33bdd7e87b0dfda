"""Database primitives that the service and the repository memory share: connections, transactions, the
schema lock. Neither depends on the other through them (imports run service -> memory -> storage)."""
