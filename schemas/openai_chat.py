"""The OpenAI-compatible bodies the gateway validates and answers, as models (and so as its OpenAPI description).

:class:`ChatCompletionRequest` is what ``POST /v1/chat/completions`` accepts: OpenAI's
``CreateChatCompletionRequest`` for the fields RouteLens reads (the same names, types and bounds;
``tests/contracts/openai`` holds the contract they are checked against), every other field passed
through to the instance as sent. Two differences, both looser: ``model`` may be left out (it is then
``auto``), and a message is one model for every role (OpenAI has one per role) whose ``content`` is
``None``, a string or a list of part objects. :class:`ErrorResponse` is every error's body.

The request's models are strict, as OpenAI's API is: a boolean is a JSON boolean, an integer a JSON
integer (not ``true``, ``2.0`` or ``"2"``), a number a JSON number (``1`` included), never a string.
Lenient coercion would let ``"stream": "false"`` pass the check and be read as a stream downstream.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

__all__ = ["ChatCompletion", "ChatCompletionRequest", "ChatMessage", "ContentPart", "ErrorBody", "ErrorResponse",
           "ModelCard", "ModelList", "StreamOptions"]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class _Open(BaseModel):
    """OpenAI objects carry fields RouteLens passes on without reading: extra fields are kept."""

    model_config = ConfigDict(extra="allow")


class _OpenStrict(_Open):
    """A request object: JSON types only (strict mode takes a dict for a nested model, an int for a float)."""

    model_config = ConfigDict(extra="allow", strict=True)


class ContentPart(_OpenStrict):
    """One part of a message's content: ``text`` parts are the query; any other type is an attachment."""

    type: str = Field(min_length=1)
    text: str | None = None


class ChatMessage(_OpenStrict):
    """One message of the conversation."""

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(_OpenStrict):
    """Options of a streamed answer."""

    include_usage: bool | None = None


class ChatCompletionRequest(_OpenStrict):
    """``POST /v1/chat/completions``: the fields RouteLens reads, as OpenAI defines them."""

    model: str = Field("auto", min_length=1, description="A model of the fleet, or ``auto`` to let RouteLens choose.")
    messages: list[ChatMessage] = Field(min_length=1)
    # OpenAI, vLLM and the simulator refuse 0: an instance would answer the 400 after an attempt.
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = Field(None, description="Only with ``stream: true``, as OpenAI says.")
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(None, ge=1, le=128)
    stop: str | list[str] | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = Field(None, description="Read by policy conditions (``metadata.tier``).")

    @field_validator("stream_options")
    @classmethod
    def _only_on_a_stream(cls, value: StreamOptions | None, info: ValidationInfo) -> StreamOptions | None:
        """OpenAI's contract: ``stream_options`` only with ``stream: true`` (its API refuses it otherwise)."""
        if value is not None and info.data.get("stream") is not True:
            raise PydanticCustomError("stream_options_without_stream",
                                      "'stream_options' is only allowed when 'stream' is true")
        return value


class ErrorBody(BaseModel):
    """OpenAI's error object."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every error the gateway and the store answer: ``{"error": {...}}``."""

    error: ErrorBody


class ChatCompletion(_Open):
    """A non-streamed answer, as the instance gave it (RouteLens adds nothing to the body)."""

    id: str
    object: str
    model: str
    choices: list[dict[str, Any]]
    created: int | None = None
    usage: dict[str, Any] | None = None


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models``."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str


class ModelList(BaseModel):
    """``GET /v1/models``: the fleet's models, and ``auto``."""

    object: Literal["list"] = "list"
    data: list[ModelCard]
