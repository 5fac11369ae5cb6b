"""Reading EXPLAIN (FORMAT JSON) plans in tests: every node of a plan, to count what its scans
did."""

from __future__ import annotations

from typing import Any


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan node and every node under it, depth first."""
    return [plan, *(node for child in plan.get("Plans", []) for node in plan_nodes(child))]
