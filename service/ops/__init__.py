"""Operational endpoints: health, readiness and metrics."""
