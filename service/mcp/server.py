"""The MCP tools and resources: each a thin call into the services the REST routes use.

Every tool runs in one tenant-scoped transaction (`mcp_call`) as the connection's caller, on
the one user that caller addresses. A domain error becomes a tool error carrying the same
problem document (and stable `code`) the REST API answers with, and nothing is written;
so do arguments that fail validation, and a database outage or conflict (the REST API's 503
problems, `service.mcp.errors.service_problem`).
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AnyUrl, BaseModel, Field, TypeAdapter, ValidationError, create_model

from service.auth.principal import ME
from service.config import CONTEXT_BUDGET_MIN_TOKENS
from service.context.schemas import ContextRequest
from service.context.service import block_question
from service.errors import DomainError, NotFound
from service.kit.input_guard import refused_input
from service.kit.pagination import MAX_PAGE_SIZE
from service.kit.types import InputRefused, JsonInt, JsonObject, QueryText, check_json
from service.mcp.calls import CallerResolver, McpCall, McpCaller, mcp_call, success_result
from service.mcp.errors import (
    ARGUMENTS,
    invalid_arguments,
    problem_result,
    protocol_error,
    protocol_errors,
    service_problem,
)
from service.mcp.schemas import (
    ContextBlock,
    Forgotten,
    Memories,
    ProfileUpdated,
    Recalled,
    Remembered,
)
from service.memories.embedding import TextVectors, embed_ahead
from service.memories.filters import MemoryFilter
from service.memories.schemas import (
    MEMORY_TEXT_MAX,
    MemoryCreate,
    MemoryKind,
    Procedures,
    SearchRequest,
)
from service.memories.search import (
    PendingVector,
    question_on_its_way,
    searched_question,
)
from service.memories.service import created_texts
from service.profile.schemas import PatchOperation

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

T = TypeVar("T")

SERVER_NAME = "mneme"
INSTRUCTIONS = (
    "Long-term memory about the user you are talking with. Call get_context before answering "
    "to see what is known; remember durable facts, preferences and decisions the user states; "
    "recall to look something up; forget when the user asks you to. Errors carry a `code` "
    "(e.g. VALIDATION_FAILED, SECRET_REFUSED, NOT_FOUND): fix the arguments or tell the user."
)

_OPERATIONS = TypeAdapter(list[PatchOperation])


class ProblemReportingTool(Tool):
    """A tool whose invalid arguments come back as the `VALIDATION_FAILED` problem.

    The SDK would report them as free text; validating first (the same model the SDK uses)
    gives the model the field list and code it gets everywhere else. Nothing has run yet.
    The arguments are held to the input rules every JSON body is held to (`check_json`: no
    NUL or lone surrogate, finite numbers) here too: both transports check each message before
    the SDK reads it (`service.mcp.errors`), but a tool does not rely on what brought it.
    """

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        try:
            check_json(arguments, [ARGUMENTS])
        except InputRefused as refused:
            return problem_result(refused_input(refused))
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            return problem_result(invalid_arguments(exc))
        except DomainError as exc:
            return problem_result(exc)
        return await super().run(arguments, context, convert_result)


class McpServer(MCPServer[Any]):
    """The SDK's server, but a call to a tool or a read of a resource it does not have is the
    `NOT_FOUND` problem (naming those it has) as a `-32602` JSON-RPC error, like any other
    message it cannot act on; the SDK answers the first with a tool error of plain text, the
    second with a JSON-RPC error of its own. The spec has a tool not found be an error of the
    protocol, not of the tool."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._tool_manager.get_tool(name) is None:
            names = ", ".join(tool.name for tool in self._tool_manager.list_tools())
            raise protocol_error(NotFound(f"No tool {name!r}; the tools are {names}."))
        return await super().call_tool(name, arguments, context)

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            templates = ", ".join(
                template.uri_template for template in self._resource_manager.list_templates()
            )
            raise protocol_error(
                NotFound(f"No resource {str(uri)!r}; the resources are {templates}.")
            ) from exc

    async def serve(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> None:
        """Serve one connection over these streams (`run_stdio_async` serves the SDK's own
        stdio streams; `mneme mcp-stdio` checks each line first)."""
        server = self._lowlevel_server
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _tool(fn: Callable[..., Any], annotations: ToolAnnotations) -> Tool:
    tool = ProblemReportingTool.from_function(fn, annotations=annotations)
    metadata = tool.fn_metadata
    # An argument the tool does not take is refused, as the REST API refuses a body field it
    # does not know: a misspelled `categroy` would otherwise be dropped without a word. The
    # input schema says so (`additionalProperties: false`).
    metadata.arg_model = _closed(metadata.arg_model)
    # The tool list is sent to the model with every conversation: no docstring indentation,
    # no schema titles (each only repeats its property's name).
    tool.description = inspect.cleandoc(tool.description or "")
    tool.parameters = _untitled(metadata.arg_model.model_json_schema(by_alias=True))
    # Publish the schema of what results look like on the wire (serialization mode: a
    # field the result leaves out when empty is advertised as optional, not nullable).
    metadata.output_schema = _untitled(
        TypeAdapter(metadata.output_model).json_schema(mode="serialization")
    )
    return tool


def _closed(model: type[ArgModelBase]) -> type[ArgModelBase]:
    """`model`, the SDK's model of a tool's arguments, refusing any argument it does not name."""
    return create_model(model.__name__, __base__=model, __cls_kwargs__={"extra": "forbid"})


def _untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the `title` keywords pydantic puts on every model and property."""
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            compact[key] = {name: _untitled(sub) for name, sub in value.items()}
        elif key == "title" and isinstance(value, str):
            continue
        elif isinstance(value, dict):
            compact[key] = _untitled(value)
        elif isinstance(value, list):
            compact[key] = [_untitled(v) if isinstance(v, dict) else v for v in value]
        else:
            compact[key] = value
    return compact


async def _run(
    ctx: Context[Any],
    resolve: CallerResolver,
    work: Callable[[McpCall], Awaitable[BaseModel]],
    render: Callable[[Any], str] | None = None,
) -> CallToolResult:
    """Run `work` in the caller's transaction; a domain error rolls it back and is reported."""

    async def without_ahead(call: McpCall, _ahead: None) -> BaseModel:
        return await work(call)

    return await _run_ahead(ctx, resolve, _nothing_ahead, without_ahead, render)


async def _run_ahead(
    ctx: Context[Any],
    resolve: CallerResolver,
    ahead: Callable[[McpCaller], AbstractAsyncContextManager[T]],
    work: Callable[[McpCall, T], Awaitable[BaseModel]],
    render: Callable[[Any], str] | None = None,
) -> CallToolResult:
    """`_run`, with what `ahead` prepares for the caller before the transaction begins (a
    question's vector on its way, a text's vector: `embedding_underway`, `embed_ahead`)
    handed to `work`."""
    try:
        caller = resolve(ctx)
    except DomainError as exc:
        return problem_result(exc)
    try:
        async with ahead(caller) as prepared, mcp_call(caller) as call:
            body = await work(call, prepared)
    except ValidationError as exc:
        return problem_result(invalid_arguments(exc))
    except Exception as exc:
        return problem_result(_problem(ctx, caller, exc))
    return success_result(body, render(body) if render else None)


def _problem(ctx: Context[Any], caller: McpCaller, error: Exception) -> DomainError:
    """`service_problem` for the message `ctx` answers (named in the log as `tools/call
    recall`, `resources/read mneme://…`)."""
    request = ctx.request_context
    params = request.params or {}
    target = params.get("name") or params.get("uri") or ""
    return service_problem(
        error, operation=f"{request.method} {target}".strip(), settings=caller.state.settings
    )


@asynccontextmanager
async def _nothing_ahead(_caller: McpCaller) -> AsyncIterator[None]:
    yield None


def _asked(
    caller: McpCaller, question: str | None
) -> AbstractAsyncContextManager[PendingVector | None]:
    """A question's vector, on its way before the call's transaction begins."""
    return question_on_its_way(caller.state.vector_columns, caller.principal.tenant_id, question)


@asynccontextmanager
async def _created_ahead(caller: McpCaller, body: MemoryCreate) -> AsyncIterator[TextVectors]:
    """The new memory's vector, made before the call's transaction begins."""
    yield await embed_ahead(caller.state.embedding_backfill.embedder, created_texts([body]))


def _render_context(body: ContextBlock) -> str:
    return body.text


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Undo what building an SDK server does to the root logger: it calls `logging.basicConfig`
    with a Rich console handler, which (the app is built before its lifespan configures
    logging) stayed next to the service's own handler, writing every record twice — the Rich
    copy of the access line alone was ~5 % of a search's CPU. Logging is the service's to
    configure (service/logs.py)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def build_mcp_server(resolve: CallerResolver) -> McpServer:
    """The MCP server; `resolve` says who each call acts as (HTTP: from the request)."""

    async def remember(
        ctx: Context[Any],
        text: Annotated[
            str,
            Field(
                max_length=MEMORY_TEXT_MAX,
                description="One self-contained statement, e.g. 'Prefers answers in French.'",
            ),
        ],
        kind: Annotated[
            MemoryKind,
            Field(
                description="semantic: a fact or preference; episodic: something that happened; "
                "procedural: a standing instruction for you."
            ),
        ] = "semantic",
        category: Annotated[
            str | None,
            Field(description="Optional lowercase label, e.g. 'preference', 'work', 'health'."),
        ] = None,
        metadata: Annotated[
            JsonObject | None, Field(description="Optional structured data kept with it.")
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Remember something about the user for future conversations.

        Store durable facts, preferences, decisions and notable events the user tells you,
        one statement per call, written so it makes sense without the conversation. Secrets
        and identifiers (passwords, keys, card or social security numbers) are refused with
        code SECRET_REFUSED. Remembering an identical statement again returns the existing
        memory (duplicate: true) instead of storing it twice.
        """

        def ahead(caller: McpCaller) -> AbstractAsyncContextManager[TextVectors]:
            return _created_ahead(caller, body())

        def body() -> MemoryCreate:
            return MemoryCreate(text=text, kind=kind, category=category, metadata=metadata or {})

        async def work(call: McpCall, vectors: TextVectors) -> Remembered:
            [written] = await call.memories.create(
                call.owner, [body()], _the_arguments, ahead=vectors
            )
            return Remembered.of(written)

        return await _run_ahead(ctx, resolve, ahead, work)

    async def recall(
        ctx: Context[Any],
        query: Annotated[QueryText, Field(description="What to look for, in natural language.")],
        limit: Annotated[JsonInt, Field(ge=1, le=50, description="Most hits to return.")] = 10,
        kinds: Annotated[
            list[MemoryKind] | None,
            Field(min_length=1, description="Only these kinds (default: all)."),
        ] = None,
        categories: Annotated[
            list[str] | None,
            Field(min_length=1, description="Only these categories (default: all)."),
        ] = None,
    ) -> Annotated[CallToolResult, Recalled]:
        """Search the user's memories (and the organization's shared ones) by meaning and words.

        Hybrid search: full-text and vector similarity fused in one ranking, best first. Each
        hit carries the memory's id (for forget), its text and labels, and its score.
        """

        def request() -> SearchRequest:
            return SearchRequest(query=query, limit=limit, kinds=kinds, categories=categories)

        def ahead(caller: McpCaller) -> AbstractAsyncContextManager[PendingVector | None]:
            return _asked(caller, searched_question(request()))

        async def work(call: McpCall, question: PendingVector | None) -> Recalled:
            found = await call.search.search(
                call.owner,
                request(),
                embedding_question=question,
                last_database_work=True,
            )
            return Recalled.of(found)

        return await _run_ahead(ctx, resolve, ahead, work)

    async def get_context(
        ctx: Context[Any],
        query: Annotated[
            QueryText, Field(description="The user's latest message or the current task.")
        ],
        budget_tokens: Annotated[
            JsonInt | None,
            Field(
                ge=CONTEXT_BUDGET_MIN_TOKENS,
                le=32_000,
                description="Token budget of the block (default: server's).",
            ),
        ] = None,
        thread_id: Annotated[
            uuid.UUID | None,
            Field(description="A Mneme thread id, to add its summaries and recent turns."),
        ] = None,
    ) -> Annotated[CallToolResult, ContextBlock]:
        """Get what you should know about the user before answering, as one compact block.

        Returns a token-budgeted text with the organization's shared memory, the user's
        profile, standing instructions, the facts and past episodes relevant to `query`.
        Read it, use what is relevant, and do not recite it to the user.
        """

        def request() -> ContextRequest:
            return ContextRequest(
                query=query, budget_tokens=budget_tokens, thread_id=thread_id, format="text"
            )

        def ahead(caller: McpCaller) -> AbstractAsyncContextManager[PendingVector | None]:
            return _asked(caller, block_question(request()))

        async def work(call: McpCall, question: PendingVector | None) -> ContextBlock:
            block = await call.context.build(
                call.caller.user_id,
                request(),
                embedding_question=question,
                last_database_work=True,
            )
            return ContextBlock.of(block)

        return await _run_ahead(ctx, resolve, ahead, work, _render_context)

    async def forget(
        ctx: Context[Any],
        memory_id: Annotated[uuid.UUID, Field(description="The id of the memory, from recall.")],
    ) -> Annotated[CallToolResult, Forgotten]:
        """Delete one of the user's memories, e.g. when the user asks you to forget it or it
        is wrong. Find its id with recall or list_memories first. The deletion is kept in
        the memory's history; organization memories cannot be deleted here."""

        async def work(call: McpCall) -> Forgotten:
            await call.memories.delete(call.owner, memory_id)
            return Forgotten(deleted=memory_id)

        return await _run(ctx, resolve, work)

    async def update_profile(
        ctx: Context[Any],
        operations: Annotated[
            list[dict[str, Any]],
            Field(
                min_length=1,
                description='JSON Patch operations on top-level keys, e.g. [{"op": "add", '
                '"path": "/timezone", "value": "Europe/Paris"}]; op is add, replace or remove.',
            ),
        ],
    ) -> Annotated[CallToolResult, ProfileUpdated]:
        """Change the user's profile: a small JSON document of stable attributes (name to
        use, timezone, language, role, preferences). All operations apply or none does.
        Keys match ^[A-Za-z_][A-Za-z0-9_-]*$; the whole profile stays under the size limit
        (PROFILE_TOO_LARGE otherwise). Returns the profile after the change."""

        async def work(call: McpCall) -> ProfileUpdated:
            try:
                patch = _OPERATIONS.validate_python(operations)
            except ValidationError as exc:
                raise invalid_arguments(exc, (ARGUMENTS, "operations")) from exc
            tagged = await call.profiles.patch(call.owner, patch, None)
            return ProfileUpdated.of(tagged.body)

        return await _run(ctx, resolve, work)

    async def list_memories(
        ctx: Context[Any],
        limit: Annotated[JsonInt, Field(ge=1, le=MAX_PAGE_SIZE, description="Page size.")] = 20,
        kinds: Annotated[
            list[MemoryKind] | None,
            Field(min_length=1, description="Only these kinds (default: all)."),
        ] = None,
        categories: Annotated[
            list[str] | None,
            Field(min_length=1, description="Only these categories (default: all)."),
        ] = None,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page, to continue.")
        ] = None,
    ) -> Annotated[CallToolResult, Memories]:
        """List the user's most recent memories, newest first (live ones: proposed and
        confirmed). Use it to review what is remembered; use recall to search."""

        async def work(call: McpCall) -> Memories:
            filters = MemoryFilter.build([call.owner], kinds=kinds, categories=categories)
            return Memories.of(await call.memories.list_page(filters, cursor=cursor, limit=limit))

        return await _run(ctx, resolve, work)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    deletes = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
    tools = [
        _tool(remember, writes),
        _tool(recall, read_only),
        _tool(get_context, read_only),
        _tool(forget, deletes),
        _tool(update_profile, writes),
        _tool(list_memories, read_only),
    ]
    with _root_logging_kept():
        server = McpServer(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            tools=tools,
            log_level="WARNING",
            middleware=[protocol_errors],
        )

    async def _read(
        ctx: Context[Any], user_id: str, work: Callable[[McpCall], Awaitable[BaseModel]]
    ) -> str:
        caller = resolve(ctx)
        try:
            _check_addressed(caller, user_id)
            async with mcp_call(caller) as call:
                body = await work(call)
        except Exception as exc:
            raise protocol_error(_problem(ctx, caller, exc)) from exc
        return body.model_dump_json(by_alias=True)

    @server.resource(
        "mneme://users/{user_id}/profile",
        name="profile",
        description="The user's profile (stored keys merged with account data); user_id: me.",
        mime_type="application/json",
    )
    async def profile(user_id: str, ctx: Context[Any]) -> str:
        async def work(call: McpCall) -> BaseModel:
            return (await call.profiles.read(call.owner)).body

        return await _read(ctx, user_id, work)

    @server.resource(
        "mneme://users/{user_id}/procedures",
        name="procedures",
        description="Standing instructions for the agent (style, workflow, safety, task "
        "policies); user_id: me.",
        mime_type="application/json",
    )
    async def procedures(user_id: str, ctx: Context[Any]) -> str:
        async def work(call: McpCall) -> Procedures:
            return await call.memories.procedures(call.owner)

        return await _read(ctx, user_id, work)

    return server


def _the_arguments(_index: int) -> list[str | int]:
    """Where a tool's one memory is in its call, for a problem's `loc`: the arguments."""
    return [ARGUMENTS]


def _check_addressed(caller: McpCaller, user_id: str) -> None:
    """A resource URI may name only the connection's own user (`me` or its id)."""
    if user_id not in (ME, caller.user_id):
        raise NotFound(f"No user {user_id!r} that this connection may address.")
