"""Mneme as an MCP server: the memory tools and resources an agent's model calls directly,
over the same services, authentication and tenant scope as the REST API."""
