"""The OpenAPI document, shaped for SDK generators as well as for readers.

FastAPI's document describes each route in isolation. Generators (openapi-python-client,
@hey-api/openapi-ts) turn every inline enum and object into a class of its own and every
declared error media type into a union member, so the raw document yields eight `kind` enums
and `Model | Problem | None` returns. `shape_for_clients` rewrites it once, at generation:

- every error is `application/problem+json` with the shared `Problem` schema, and every
  operation declares a 500 and a `default` problem, so no answer reaches a client as raw bytes;
- the string enums of the domain (`MemoryKind`, `Lifecycle`, ...) and free-form `metadata`
  are shared component schemas referenced wherever they occur;
- tags carry descriptions, the document names a server, and the public endpoints say
  `security: []` while everything else inherits the bearer requirement;
- examples get back the `null`s FastAPI's rendering drops (it encodes the whole document with
  `exclude_none`), so each one is valid against its own schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, Final, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.context.schemas import ContextFormat, SectionName
from service.errors import PROBLEM_CONTENT_TYPE, Problem, ProblemCode
from service.extraction.schemas import QueuedJobState, WritePathMode
from service.memories.schemas import (
    FusionMethod,
    Lifecycle,
    MemoryKind,
    MemoryScope,
    NewLifecycle,
    SearchMode,
)
from service.profile.schemas import ProfileSource
from service.threads.schemas import MessageRole, StoredRole

SCHEMA_PREFIX: Final = "#/components/schemas/"
BEARER_SCHEME: Final = "HTTPBearer"

PUBLIC_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})
"""Paths answered without a token: probes and the metrics scrape."""

SERVERS: Final = [
    {"url": "http://localhost:8000", "description": "A local `mneme serve` (the default port)."}
]

TAGS: Final = [
    {"name": "ops", "description": "Liveness, readiness and Prometheus metrics; no token."},
    {"name": "users", "description": "An end user of the tenant: account overlay and export."},
    {
        "name": "memories",
        "description": "A user's long-term memories: write (one or a batch), hybrid search, "
        "history, procedures, compaction and the write path's jobs.",
    },
    {
        "name": "org memories",
        "description": "Memories shared by the whole organization; written by admins only.",
    },
    {
        "name": "profile",
        "description": "A user's profile document, changed with JSON Patch and guarded by ETags.",
    },
    {"name": "org profile", "description": "The organization's profile document."},
    {
        "name": "threads",
        "description": "Conversations: messages, rolling summaries and the recent window. "
        "Appending can return the next context block in the same call.",
    },
    {
        "name": "context",
        "description": "The context block to put in front of the model for the next turn.",
    },
    {
        "name": "admin",
        "description": "Tenant administration: API keys, jobs, users, purge, import, "
        "retention and the audit trail (admin tokens only).",
    },
]

SHARED_ENUMS: Final[Mapping[str, Any]] = {
    "MemoryKind": MemoryKind,
    "Lifecycle": Lifecycle,
    "NewLifecycle": NewLifecycle,
    "MemoryScope": MemoryScope,
    "SearchMode": SearchMode,
    "FusionMethod": FusionMethod,
    "ContextSectionName": SectionName,
    "ContextFormat": ContextFormat,
    "MessageRole": MessageRole,
    "StoredRole": StoredRole,
    "ProfileSource": ProfileSource,
    "WritePathMode": WritePathMode,
    "QueuedJobState": QueuedJobState,
    "ProblemCode": ProblemCode,
}
"""Domain string enums rendered once, as components, and referenced where they occur."""

METADATA_SCHEMA: Final = {
    "type": "object",
    "additionalProperties": True,
    "title": "Metadata",
    "description": "Free-form JSON object stored with the record and returned as given.",
    "examples": [{"source": "onboarding", "priority": 2}],
}

# Keys of an inline schema that a `$ref` replaces; the rest (description, default, examples)
# still says something about the field and stays beside the reference.
_REPLACED_BY_REF: Final = frozenset({"type", "enum", "title", "additionalProperties"})


def shape_for_clients(spec: dict[str, Any]) -> dict[str, Any]:
    """The FastAPI-generated document, rewritten as the module docstring says (in place)."""
    schemas: dict[str, Any] = spec.setdefault("components", {}).setdefault("schemas", {})
    _add_problem_schemas(schemas)
    enums = {tuple(get_args(alias)): name for name, alias in SHARED_ENUMS.items()}
    for name, alias in SHARED_ENUMS.items():
        schemas[name] = {"type": "string", "enum": list(get_args(alias)), "title": name}
    schemas["Metadata"] = METADATA_SCHEMA
    for name, schema in list(schemas.items()):
        if name not in SHARED_ENUMS and name != "Metadata":
            schemas[name] = _share_components(schema, enums)
    for schema in schemas.values():
        for example in schema.get("examples", ()):
            _restore_nulls(example, schema, schemas)
    for item in spec["paths"].values():
        for operation in item.values():
            _shape_operation(operation, enums)
    spec["servers"] = SERVERS
    spec["tags"] = TAGS
    spec["security"] = [{BEARER_SCHEME: []}]
    for path in PUBLIC_PATHS & spec["paths"].keys():
        for operation in spec["paths"][path].values():
            operation["security"] = []
    return spec


def _add_problem_schemas(schemas: dict[str, Any]) -> None:
    definition = Problem.model_json_schema(ref_template=SCHEMA_PREFIX + "{model}")
    schemas.update(definition.pop("$defs", {}))
    schemas["Problem"] = definition


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": SCHEMA_PREFIX + "Problem"}}},
    }


def _shape_operation(operation: dict[str, Any], enums: Mapping[tuple[str, ...], str]) -> None:
    responses: dict[str, Any] = operation["responses"]
    for status, response in responses.items():
        if status.isdigit() and int(status) >= 400:
            responses[status] = _problem(
                response.get("description") or HTTPStatus(int(status)).phrase
            )
    responses.setdefault(
        "500", _problem("Internal server error (`INTERNAL_ERROR`, with a trace id).")
    )
    responses["default"] = _problem("Any other error, as an RFC 9457 problem.")
    for parameter in operation.get("parameters", ()):
        parameter["schema"] = _share_components(parameter["schema"], enums)


def _share_components(node: Any, enums: Mapping[tuple[str, ...], str]) -> Any:
    """`node` with inline domain enums and `metadata` objects replaced by references.

    `key` is the keyword or property name a value sits under; a property is `metadata` only
    directly inside `properties`.
    """

    def visit(value: Any, key: str | None) -> Any:
        if isinstance(value, list):
            return [visit(item, None) for item in value]
        if not isinstance(value, dict):
            return value
        if value.get("type") == "string" and "enum" in value:
            name = enums.get(tuple(value["enum"]))
            if name is not None:
                return _reference(value, name)
        if key == "metadata" and value.get("type") == "object":
            return _reference(value, "Metadata")
        if key == "metadata" and "anyOf" in value:
            return {**value, "anyOf": [visit(option, key) for option in value["anyOf"]]}
        if key == "properties":
            return {name: visit(schema, name) for name, schema in value.items()}
        return {name: visit(child, name) for name, child in value.items()}

    return visit(node, None)


def _resolve(schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith(SCHEMA_PREFIX):
        return _resolve(schemas[reference.removeprefix(SCHEMA_PREFIX)], schemas)
    return schema


def _allows_null(schema: Mapping[str, Any]) -> bool:
    kinds = schema.get("type")
    return (
        kinds == "null"
        or (isinstance(kinds, list) and "null" in kinds)
        or any(_allows_null(option) for option in schema.get("anyOf", ()))
    )


def _restore_nulls(example: Any, schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> None:
    """Put back, in place, the required properties an example held as `null`.

    FastAPI encodes the whole document with `exclude_none`, which drops them from examples as
    well: an example of an answer would then lack fields the answer always has. A required
    property missing from an example was `null` if its schema allows `null` (the examples are
    written from the models, which cannot leave out a required field otherwise).
    """
    schema = _resolve(schema, schemas)
    if isinstance(example, list) and isinstance(schema.get("items"), Mapping):
        for item in example:
            _restore_nulls(item, schema["items"], schemas)
        return
    if not isinstance(example, dict):
        return
    options = [_resolve(option, schemas) for option in schema.get("anyOf", ())]
    objects = [option for option in options if "properties" in option]
    if len(objects) == 1:
        _restore_nulls(example, objects[0], schemas)
        return
    properties: Mapping[str, Any] = schema.get("properties", {})
    dropped = [
        name
        for name in schema.get("required", ())
        if name not in example and name in properties and _allows_null(properties[name])
    ]
    if dropped:
        # In the alphabetical order the rest of the example was rendered in.
        restored = sorted({**example, **dict.fromkeys(dropped)}.items())
        example.clear()
        example.update(restored)
    for name, value in example.items():
        if name in properties:
            _restore_nulls(value, properties[name], schemas)


def _reference(inline: Mapping[str, Any], name: str) -> dict[str, Any]:
    kept = {key: value for key, value in inline.items() if key not in _REPLACED_BY_REF}
    return {"$ref": SCHEMA_PREFIX + name, **kept}


def client_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """An `app.openapi` replacement that builds the shaped document once and caches it."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = shape_for_clients(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    openapi_version=app.openapi_version,
                    description=app.description,
                    routes=app.routes,
                )
            )
        return app.openapi_schema

    return openapi
