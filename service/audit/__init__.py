"""The audit trail of administrative and privacy-relevant actions."""
