"""Mneme: long-term memory for LLM agents, as a multi-tenant HTTP service on Postgres."""
