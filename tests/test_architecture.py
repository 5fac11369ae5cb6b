"""The import graph shows the architecture: routers never import routers, the ground floor
(everything the domains stand on) imports no domain, and no two packages of `service` import
each other."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "service"
BENCHMARKS = SERVICE.parent / "benchmarks"
# The composition root wires every domain together; the CLI drives the app from outside.
COMPOSITION_ROOTS = {"main", "cli", "__main__"}
# Entry points over the domains: the MCP server calls their services, and the OpenAPI document
# names their shared enums for client generators.
ADAPTERS = {"mcp", "openapi"}


def runtime_imports(path: Path, package: str = "service") -> set[str]:
    """Modules of `package` this file imports when it runs (not under TYPE_CHECKING), at the
    top or inside a function."""
    tree = ast.parse(path.read_text())
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for child in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(package))
    return found


def modules() -> dict[str, set[str]]:
    graph = {}
    for path in SERVICE.rglob("*.py"):
        name = ".".join(("service", *path.relative_to(SERVICE).with_suffix("").parts))
        graph[name.removesuffix(".__init__")] = runtime_imports(path)
    return graph


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_routers_never_import_routers() -> None:
    offenders = [
        (module, imported)
        for module, imports in modules().items()
        if module.endswith(".router")
        for imported in imports
        if imported.endswith(".router")
    ]
    assert offenders == []


def domains() -> set[str]:
    return {p.name for p in SERVICE.iterdir() if (p / "router.py").exists()}


def test_the_ground_floor_imports_no_domain() -> None:
    """The process state, the unit of work, the request's shared dependencies, telemetry, the
    kit, the providers, auth and jobs know no domain (a domain's types may appear there for
    the type checker only): each domain hands them what they need (its services' factories,
    its job handlers, its recorders), so any domain can use all of them."""
    outside = domains() | COMPOSITION_ROOTS | ADAPTERS
    offenders = sorted(
        (module, imported)
        for module, imports in modules().items()
        if package_of(module) not in outside
        for imported in imports
        if package_of(imported) in domains()
    )
    assert offenders == []


def test_the_ground_floor_is_what_the_domains_stand_on() -> None:
    """The rule above covers the modules it is about (a renamed module cannot slip out)."""
    ground = {m for m in modules() if package_of(m) not in domains() | COMPOSITION_ROOTS | ADAPTERS}
    assert {
        "service.dependencies",
        "service.services",
        "service.state",
        "service.observability",
    } <= ground


def test_no_two_packages_import_each_other() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in modules().items():
        source = package_of(module)
        if source in COMPOSITION_ROOTS:
            continue
        for imported in imports:
            target = package_of(imported)
            if target != source:
                edges[source].add(target)
    loops = sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, set()))
    assert loops == []


def test_the_providers_import_each_other_in_one_direction() -> None:
    """The embedding contract knows no embedder; the factory is the one module that knows them
    all, so no provider module reaches itself through the others."""
    graph = {
        module: {imported for imported in imports if imported.startswith("service.providers.")}
        for module, imports in modules().items()
        if module.startswith("service.providers.")
    }
    assert in_a_cycle(graph) == []


def in_a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """The modules of `graph` that reach themselves through their imports."""

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for following in graph.get(start, set()):
            if following == goal or (
                following not in seen and reaches(following, goal, seen | {following})
            ):
                return True
        return False

    return sorted(module for module in graph if reaches(module, module, set()))


def test_the_benchmark_modules_import_each_other_in_one_direction() -> None:
    """A module that builds on another's measurements is driven from above both, not by a
    deferred import back into it."""
    graph = {
        f"benchmarks.{path.stem}": runtime_imports(path, "benchmarks")
        for path in BENCHMARKS.glob("*.py")
    }
    assert in_a_cycle(graph) == []
