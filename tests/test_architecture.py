"""The import graph shows the architecture: routers never import routers, the ground floor
(everything the domains stand on) imports no domain, no two packages of `service` import each
other, no module reaches itself through its imports, only the CLI reaches the benchmarks, and
the telemetry package declares no domain's metrics."""

from __future__ import annotations

import ast
import functools
import re
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
    top or inside a function; `from a import b` counts `a` and `a.b` (which is a module when
    `b` is a submodule)."""
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
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(package))
    return found


@functools.cache
def modules(root: Path = SERVICE) -> dict[str, set[str]]:
    """Every module under `root` (a package of the repository) and the modules of that package
    it imports at run time."""
    graph = {}
    for path in root.rglob("*.py"):
        name = ".".join((root.name, *path.relative_to(root).with_suffix("").parts))
        graph[name.removesuffix(".__init__")] = runtime_imports(path, root.name)
    return {module: imports & graph.keys() for module, imports in graph.items()}


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

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        waiting = list(graph.get(start, ()))
        while waiting:
            module = waiting.pop()
            if module not in seen:
                seen.add(module)
                waiting.extend(graph.get(module, ()))
        return seen

    return sorted(module for module in graph if module in reachable(module))


def test_the_benchmark_modules_import_each_other_in_one_direction() -> None:
    """A module that builds on another's measurements is driven from above both, not by a
    deferred import back into it (the scripts included)."""
    assert in_a_cycle(modules(BENCHMARKS)) == []


def test_no_module_of_the_service_reaches_itself_through_its_imports() -> None:
    """Within a package as between packages, and through deferred imports too: a module that
    needs another's work is built above it, never imports back into what imports it."""
    assert in_a_cycle(modules()) == []


def test_only_the_cli_reaches_the_benchmarks() -> None:
    """The benchmarks are a package of their own over the service: the service runs without
    them, and only `mneme bench` (the CLI) loads them."""
    offenders = sorted(
        (module, imported)
        for module, imports in modules().items()
        if module != "service.cli"
        for imported in imports
        if imported.split(".")[0] == "benchmarks"
    )
    assert offenders == []


# What the domains are about, beyond their packages' names: a metric named for one of these
# belongs to the domain that records it.
DOMAIN_SUBJECTS = ("search", "rerank", "reembed", "summar", "extract", "posting")


def test_the_telemetry_package_declares_no_domain_metric() -> None:
    """`service.observability` declares the instruments of the machinery every domain shares
    (HTTP, auth, embedders, jobs, LLM, database pool, event loop); a domain declares its own
    in its telemetry module, on the same registry."""
    from service.observability import DomainMetrics, Metrics

    words = {*DOMAIN_SUBJECTS, *domains(), *(singular(domain) for domain in domains())}
    about_a_domain = re.compile("|".join(rf"(^|_){re.escape(word)}" for word in sorted(words)))
    declared = {
        family.name
        for registry in (DomainMetrics().registry, Metrics().registry)
        for family in registry.collect()
    }
    assert {"mneme_http_requests", "mneme_job_runs", "mneme_embedding_duration_seconds"} <= declared
    assert sorted(name for name in declared if about_a_domain.search(name)) == []


def singular(name: str) -> str:
    """`memories` -> `memory`, `threads` -> `thread` (`ops` stays)."""
    if name.endswith("ies"):
        return name.removesuffix("ies") + "y"
    return name.removesuffix("s") if len(name) > 4 else name
