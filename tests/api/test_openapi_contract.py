"""The committed OpenAPI document keeps its promises to SDK users: its examples are valid, every
operation says what it does, and its error codes are the ones the service answers with."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import service
from service.errors import DomainError, ProblemCode

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT_PATH = ROOT / "docs" / "openapi.json"
SERVICE = ROOT / "service"
DOCUMENT_URI = "urn:mneme:openapi"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text())
    return loaded


def escape(segment: str) -> str:
    """A JSON pointer segment (RFC 6901)."""
    return segment.replace("~", "~0").replace("/", "~1")


def examples(document: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(where, pointer to the schema it must satisfy, example) for every example in the
    document: a schema's `examples` (components and inline schemas, properties included), and
    a media type's or parameter's `example` / `examples`."""

    def visit(node: Any, pointer: str) -> Iterator[tuple[str, str, Any]]:
        if isinstance(node, list):
            for index, item in enumerate(node):
                yield from visit(item, f"{pointer}/{index}")
            return
        if not isinstance(node, dict):
            return
        schema_pointer = f"{pointer}/schema" if isinstance(node.get("schema"), dict) else None
        for key, value in node.items():
            here = f"{pointer}/{escape(key)}"
            # A schema's `examples` is a list of values; a media type's or parameter's is a map
            # of Example objects, and `example` a single value, both for its `schema`.
            if key == "examples" and isinstance(value, list) and "schema" not in node:
                yield from ((f"{here}/{i}", pointer, item) for i, item in enumerate(value))
            elif key == "examples" and isinstance(value, dict) and schema_pointer:
                for name, example in value.items():
                    yield f"{here}/{escape(name)}", schema_pointer, example["value"]
            elif key == "example" and schema_pointer:
                yield here, schema_pointer, value
            else:
                yield from visit(value, here)

    yield from visit(document, "")


def test_every_example_is_valid_against_its_own_schema(document: dict[str, Any]) -> None:
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(document, default_specification=DRAFT202012)
    )
    found = list(examples(document))
    # The memory, search, thread and context answers carry examples, as do request bodies.
    assert len(found) >= 25
    invalid = []
    for where, schema_pointer, example in found:
        validator = Draft202012Validator(
            {"$ref": f"{DOCUMENT_URI}#{schema_pointer}"},
            registry=registry,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
        invalid += [f"{where}: {error.message}" for error in validator.iter_errors(example)]
    assert not invalid, "\n".join(invalid)


def test_every_operation_says_what_it_does(document: dict[str, Any]) -> None:
    """A summary names the operation; the description tells an SDK user (it becomes the
    method's docstring) what it does and answers beyond the summary."""
    undescribed = [
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if not operation.get("summary") or len(operation.get("description", "").strip()) < 20
    ]
    assert not undescribed, undescribed


def domain_errors() -> Iterator[type[DomainError]]:
    """Every `DomainError` class of the service (all its modules imported first)."""
    for module in pkgutil.walk_packages(service.__path__, "service."):
        if not module.name.endswith(".__main__"):  # that one runs the CLI
            importlib.import_module(module.name)
    pending = [DomainError]
    while pending:
        error = pending.pop()
        yield error
        pending += error.__subclasses__()


def string_constants(path: Path, skip_lines: range = range(0)) -> set[str]:
    """The string literals of one source file, except those on `skip_lines`."""
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.lineno not in skip_lines
    }


def test_problem_codes_are_the_ones_the_service_answers_with(document: dict[str, Any]) -> None:
    codes = get_args(ProblemCode)
    assert len(codes) == len(set(codes))
    # Each error class's code is listed (mypy checks this too, for the literal assignments)...
    unlisted = {error.code for error in domain_errors()} - set(codes)
    assert not unlisted, f"add {unlisted} to service.errors.ProblemCode"
    # ... and each listed code is answered somewhere: it occurs in the source beyond the list.
    errors_path = SERVICE / "errors.py"
    listing = next(
        node
        for node in ast.walk(ast.parse(errors_path.read_text()))
        if isinstance(node, ast.Assign)
        and any(
            isinstance(target, ast.Name) and target.id == "ProblemCode" for target in node.targets
        )
    )
    assert listing.end_lineno is not None
    used = string_constants(errors_path, range(listing.lineno, listing.end_lineno + 1))
    for path in SERVICE.rglob("*.py"):
        if path != errors_path:
            used |= string_constants(path)
    unused = set(codes) - used
    assert not unused, f"{unused} listed in ProblemCode but never answered"
    # The document publishes exactly this list, in this order, as `Problem.code`'s schema.
    schemas = document["components"]["schemas"]
    assert schemas["ProblemCode"]["enum"] == list(codes)
    assert schemas["Problem"]["properties"]["code"]["$ref"] == "#/components/schemas/ProblemCode"
