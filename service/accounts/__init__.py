"""Accounts: the tenant's users and the auth overlay (name, email, avatar, linked providers)
their tokens carry."""
