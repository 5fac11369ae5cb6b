"""Admins: the tenant's users, purge with proof, export and import, the audit trail."""
