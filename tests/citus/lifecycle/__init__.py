"""The admin lifecycle tests (purge, export/import, retention, users and audit) again, against
the Citus cluster: the same test functions, collected here with the cluster's fixtures."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from _pytest.fixtures import FixtureFunctionDefinition


def collected_again(module: ModuleType) -> dict[str, Any]:
    """The tests of `module` and the fixtures it defines or imports, to be bound into another
    test module so that pytest collects them there, under that directory's fixtures."""
    return {
        name: value
        for name, value in vars(module).items()
        if (name.startswith("test_") and callable(value))
        or isinstance(value, FixtureFunctionDefinition)
    }
