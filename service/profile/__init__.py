"""Profiles: a JSON document per user (and one for the organization), written by JSON Patch."""
