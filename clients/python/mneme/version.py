"""The package version: the version of the API (`info.version` of docs/openapi.json) it was
generated from, so a client release names the API it speaks (written by clients/generate.py)."""

__version__ = "0.1.0"
