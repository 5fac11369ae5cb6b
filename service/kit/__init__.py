"""Shared helpers with no business rules: pagination, ETags, idempotency, the repository
base, token counting."""
