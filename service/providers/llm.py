"""Chat models behind a small protocol: structured (strict JSON schema) answers, one error type.

`OpenAIChatModel` talks to any OpenAI-compatible `/v1/chat/completions` endpoint through the
`openai` client and asks for Structured Outputs (`response_format` of type `json_schema`,
`strict: true`). The reply is validated again with pydantic (unknown fields rejected, no
coercion), because not every compatible server enforces the schema. Retries with exponential
backoff are the client's own (connection errors, timeouts, 408/409/429 and 5xx, honouring
Retry-After); whatever is left after them, and every unusable reply, becomes `LLMUnavailable`.

`LLMUnavailable` messages never quote the model's reply or the prompt: they end up in logs and
job records that are not tenant-scoped.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from opentelemetry import trace
from pydantic import BaseModel, ValidationError

from service.observability import DOMAIN_METRICS, tracer

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion

    # For the type checker only: the settings import the providers (they check the
    # embedding models with them).
    from service.config import Settings

OutputT = TypeVar("OutputT", bound=BaseModel)

# Servers that check no key (local ones) still need the client to send one.
PLACEHOLDER_API_KEY = "unused"


class LLMUnavailable(Exception):
    """The chat model gave no usable answer (HTTP error, timeout, refusal, invalid output)."""


class ChatModel(Protocol):
    """Answers one system + user prompt with an instance of a pydantic model."""

    model_name: str

    async def complete_json(
        self, *, system: str, user: str, output: type[OutputT], schema_name: str
    ) -> OutputT:
        """The model's reply, parsed into `output`; raises `LLMUnavailable`."""
        ...

    async def aclose(self) -> None:
        """Release connections; call once at shutdown."""
        ...


def strict_json_schema(output: type[BaseModel]) -> dict[str, Any]:
    """`output`'s JSON schema in the form strict Structured Outputs accept.

    Strict mode wants every object closed (`additionalProperties: false`) with every property
    required, so the output models forbid extra fields and declare no defaults.
    """
    if output.model_config.get("extra") != "forbid":
        raise ValueError(f"{output.__name__} must forbid extra fields (extra='forbid')")
    schema = output.model_json_schema()
    _close_objects(schema)
    return schema


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object":
            properties = node.get("properties", {})
            node["additionalProperties"] = False
            node["required"] = list(properties)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)


class OpenAIChatModel:
    """A chat model reached through an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout_seconds: float,
        max_retries: int,
    ) -> None:
        # The client library takes a third of a second to import: only a service with an LLM
        # configured pays for it.
        from openai import AsyncOpenAI

        self.model_name = model
        self._client = AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,
        )
        endpoint = urlsplit(str(self._client.base_url))
        self._server_attributes: dict[str, str | int] = {"server.address": endpoint.hostname or ""}
        if endpoint.port is not None:
            self._server_attributes["server.port"] = endpoint.port

    async def complete_json(
        self, *, system: str, user: str, output: type[OutputT], schema_name: str
    ) -> OutputT:
        # GenAI semantic conventions: model, token usage and error type; never the prompt or
        # the reply (they are a tenant's words).
        started = time.perf_counter()
        with tracer.start_as_current_span(
            f"chat {self.model_name}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": self.model_name,
                "gen_ai.output.type": "json",
                **self._server_attributes,
            },
        ) as span:
            try:
                completion = await self._create(system, user, output, schema_name)
                span.set_attribute("gen_ai.response.model", completion.model)
                if completion.usage is not None:
                    self._record_usage(
                        span, completion.usage.prompt_tokens, completion.usage.completion_tokens
                    )
                span.set_attribute(
                    "gen_ai.response.finish_reasons",
                    [choice.finish_reason or "" for choice in completion.choices],
                )
                parsed = self._parse(completion, output)
            except LLMUnavailable as exc:
                error_type = type(exc.__cause__).__name__ if exc.__cause__ else "invalid_output"
                span.set_attribute("error.type", error_type)
                span.set_status(trace.StatusCode.ERROR)
                DOMAIN_METRICS.llm_calls.labels(self.model_name, "error").inc()
                DOMAIN_METRICS.llm_errors.labels(self.model_name, error_type).inc()
                raise
            finally:
                DOMAIN_METRICS.llm_latency.labels(self.model_name).observe(
                    time.perf_counter() - started
                )
            DOMAIN_METRICS.llm_calls.labels(self.model_name, "ok").inc()
            return parsed

    def _record_usage(self, span: trace.Span, input_tokens: int, output_tokens: int) -> None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        DOMAIN_METRICS.llm_tokens.labels(self.model_name, "input").inc(input_tokens)
        DOMAIN_METRICS.llm_tokens.labels(self.model_name, "output").inc(output_tokens)

    async def _create(
        self, system: str, user: str, output: type[BaseModel], schema_name: str
    ) -> ChatCompletion:
        from openai import APIConnectionError, APIStatusError, APITimeoutError, OpenAIError

        schema = strict_json_schema(output)
        try:
            return await self._client.chat.completions.create(
                model=self.model_name,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "strict": True, "schema": schema},
                },
            )
        except APITimeoutError as exc:
            raise LLMUnavailable(f"{self.model_name} timed out") from exc
        except APIStatusError as exc:
            raise LLMUnavailable(f"{self.model_name} answered HTTP {exc.status_code}") from exc
        except APIConnectionError as exc:
            raise LLMUnavailable(f"{self.model_name} could not be reached") from exc
        except OpenAIError as exc:
            raise LLMUnavailable(
                f"{self.model_name} request failed ({type(exc).__name__})"
            ) from exc

    def _parse(self, completion: ChatCompletion, output: type[OutputT]) -> OutputT:
        if not completion.choices:
            raise LLMUnavailable(f"{self.model_name} returned no choices")
        choice = completion.choices[0]
        if choice.message.refusal:
            raise LLMUnavailable(f"{self.model_name} refused to answer")
        if choice.finish_reason == "length":
            raise LLMUnavailable(f"{self.model_name} reply was cut off at its token limit")
        content = choice.message.content
        if not content:
            raise LLMUnavailable(f"{self.model_name} returned an empty reply")
        try:
            return output.model_validate_json(content, strict=True)
        except ValidationError as exc:
            refused = exc
        repaired = lone_surrogates_replaced(content)
        if repaired != content:
            # A lone UTF-16 surrogate escape makes the whole reply invalid JSON to the parser,
            # and the pass would fail on every attempt: the character is read as a decoder
            # reads one it cannot decode (U+FFFD), and the rest of the reply is used.
            try:
                return output.model_validate_json(repaired, strict=True)
            except ValidationError as exc:
                refused = exc
        # Error types and locations only: the input values are the tenant's words.
        problems = sorted(
            {f"{'.'.join(map(str, e['loc'])) or '$'}:{e['type']}" for e in refused.errors()}
        )
        raise LLMUnavailable(
            f"{self.model_name} reply does not match {output.__name__}: " + ", ".join(problems[:5])
        )

    async def aclose(self) -> None:
        await self._client.close()


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\.", re.DOTALL)
"""One escape of a JSON text, in order: a `\\u` escape of four hex digits (its code captured)
or any other (`\\\\` consumed whole, so the `u` after an escaped backslash is never read as an
escape)."""


def lone_surrogates_replaced(text: str) -> str:
    """`text` (JSON) with each `\\u` escape of a UTF-16 surrogate that is not half of a pair
    written as `\\ufffd`, the replacement character; a pair (a high escape right before a low
    one) stays."""
    escapes = list(_JSON_ESCAPE.finditer(text))

    def surrogate(index: int, low: bool) -> bool:
        if not 0 <= index < len(escapes) or escapes[index].group(1) is None:
            return False
        value = int(escapes[index].group(1), 16)
        return (0xDC00 if low else 0xD800) <= value <= (0xDFFF if low else 0xDBFF)

    lone: list[re.Match[str]] = []
    for index, escape in enumerate(escapes):
        if surrogate(index, low=False):
            follows = index + 1 < len(escapes) and escapes[index + 1].start() == escape.end()
            if not (follows and surrogate(index + 1, low=True)):
                lone.append(escape)
        elif surrogate(index, low=True):
            precedes = index > 0 and escapes[index - 1].end() == escape.start()
            if not (precedes and surrogate(index - 1, low=False)):
                lone.append(escape)
    for escape in reversed(lone):
        text = text[: escape.start()] + "\\ufffd" + text[escape.end() :]
    return text


def build_chat_model(settings: Settings) -> ChatModel | None:
    """The configured chat model, or None when no LLM is configured (features that need one
    are then off)."""
    if not settings.llm_configured:
        return None
    return OpenAIChatModel(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )
