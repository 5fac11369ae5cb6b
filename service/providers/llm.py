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

from typing import Any, Protocol, TypeVar

from openai import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    OpenAIError,
)
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

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
        self.model_name = model
        self._client = AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,
        )

    async def complete_json(
        self, *, system: str, user: str, output: type[OutputT], schema_name: str
    ) -> OutputT:
        schema = strict_json_schema(output)
        try:
            completion: ChatCompletion = await self._client.chat.completions.create(
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
        return self._parse(completion, output)

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
            # Error types and locations only: the input values are the tenant's words.
            problems = sorted(
                {f"{'.'.join(map(str, e['loc'])) or '$'}:{e['type']}" for e in exc.errors()}
            )
            raise LLMUnavailable(
                f"{self.model_name} reply does not match {output.__name__}: "
                + ", ".join(problems[:5])
            ) from None

    async def aclose(self) -> None:
        await self._client.close()


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
