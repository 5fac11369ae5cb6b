"""Memories: remember, search (one fusion statement), change and forget, with history."""
