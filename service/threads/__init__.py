"""Threads: conversations, their ordered messages and their summaries."""
