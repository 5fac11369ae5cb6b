"""A LangGraph `BaseStore` backed by Mneme's HTTP API."""

from mneme_langgraph.store import MnemeStore, MnemeStoreError, MnemeStoreUnreachable

__all__ = ["MnemeStore", "MnemeStoreError", "MnemeStoreUnreachable"]
