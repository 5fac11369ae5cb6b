"""API keys: hashed, scoped, revocable credentials for service-to-service calls."""
