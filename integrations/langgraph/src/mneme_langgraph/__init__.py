"""A LangGraph `BaseStore` backed by Mneme's HTTP API."""

from mneme_langgraph.store import MnemeStore, MnemeStoreError

__all__ = ["MnemeStore", "MnemeStoreError"]
