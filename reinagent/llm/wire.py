"""What a chat-completion server must send back, checked before anything reaches an agent.

A reply that is not a chat completion (an HTML page with status 200, invalid JSON, `message:
null`, no choices) is not the model's answer: turned into an empty string it would be scored as a
failed attempt and reflected on. Here it becomes a `MalformedResponseError` (recorded as that
(task, trial)'s error, redone by `resume --retry-errors`), or, when the body was merely cut short,
a connection error that the retry policy retries.

Also here: which API key goes to which endpoint. A hosted provider's key (OPENAI_API_KEY, ...) is
sent only to that provider's own endpoint; a `--base-url` server gets REINAGENT_SERVER_API_KEY, or
the variable named by `--api-key-env`, and nothing else.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reinagent.errors import ConfigError, MalformedResponseError
from reinagent.redact import note_credential_variable, note_url_credentials

SERVER_KEY_ENV = "REINAGENT_SERVER_API_KEY"
# Endpoints that may receive the provider's own key from the environment, by host.
PROVIDER_HOSTS = {"api.openai.com": "OPENAI_API_KEY"}


class WireMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str | None = None
    # null is legal in the OpenAI schema (a refusal, all tokens spent on reasoning): the model
    # said nothing, which is its answer, not a broken reply.
    content: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        # some servers send content as a list of parts: [{"type": "text", "text": "..."}]
        if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value):
            return "".join(p.get("text", "") for p in value)
        return value


class WireChoice(BaseModel):
    model_config = ConfigDict(extra="allow")

    index: int = 0
    message: WireMessage  # required and not null: `message: null` is a broken reply
    finish_reason: str | None = None


class WireUsage(BaseModel):
    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @field_validator("prompt_tokens", "completion_tokens", mode="before")
    @classmethod
    def _none_is_zero(cls, value: Any) -> Any:
        return 0 if value is None else value


class ChatCompletion(BaseModel):
    """The part of an OpenAI `chat.completion` object the framework reads."""

    model_config = ConfigDict(extra="allow")

    choices: list[WireChoice] = Field(min_length=1)
    usage: WireUsage | None = None

    @property
    def text(self) -> str:
        return self.choices[0].message.content or ""


class CutBodyError(ConnectionError):
    """The body ended in the middle of the JSON document: the connection was cut (transient)."""


def parse_body(raw: bytes, content_type: str, what: str) -> dict[str, Any]:
    """The JSON object of a 2xx answer. A document cut short raises CutBodyError (retried);
    anything else that is not a JSON object raises MalformedResponseError."""
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError as err:
        stripped = text.rstrip()
        # An unterminated string, or an error at the very end, can only mean the text stopped early.
        cut = str(getattr(err, "msg", "")).startswith("Unterminated string") or getattr(err, "pos", 0) >= len(stripped)
        if stripped[:1] in ("{", "[") and cut:
            raise CutBodyError(f"{what}: the reply ended after {len(raw)} bytes, mid-document") from None
        kind = "an HTML page" if "html" in content_type.lower() or stripped[:1] == "<" else "invalid JSON"
        raise MalformedResponseError(f"{what} sent {kind} instead of a chat completion: {_snippet(text)}") from None
    if not isinstance(data, dict):
        raise MalformedResponseError(f"{what} sent a JSON {type(data).__name__} instead of a chat completion")
    return data


def validate_completion(data: dict[str, Any], what: str) -> ChatCompletion:
    """`data` as a ChatCompletion, or MalformedResponseError saying what is wrong with it."""
    try:
        return ChatCompletion.model_validate(data)
    except ValidationError as err:
        error = data.get("error")
        if error:  # some servers answer 200 with an error object
            message = error.get("message") if isinstance(error, dict) else error
            raise MalformedResponseError(f"{what} answered with an error: {_snippet(str(message))}") from None
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise MalformedResponseError(
            f"{what} sent a malformed chat completion ({where}: {first['msg']}): {_snippet(json.dumps(data))}"
        ) from None


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


# --- API keys ---------------------------------------------------------------------------------


def is_provider_endpoint(base_url: str | None) -> bool:
    """Whether `base_url` is a hosted provider's own endpoint, which may get that provider's key:
    its host, over https, on the default port. `http://api.openai.com:8080/v1` is not: over plain
    HTTP the key goes to whatever answers on that port (a planted spec resumed without a question
    sent it there, issue 54); such a URL is an ordinary server and gets REINAGENT_SERVER_API_KEY."""
    if not base_url:
        return False
    parts = urlsplit(base_url.strip())
    try:
        port = parts.port
    except ValueError:  # a port that is no number, or out of range: no provider's
        return False
    return (parts.scheme.lower() == "https" and port in (None, 443)
            and (parts.hostname or "").lower() in PROVIDER_HOSTS)


def endpoint_key(base_url: str | None, api_key_env: str | None = None) -> str | None:
    """The API key for requests to `base_url` (None: send none).

    `api_key_env` names the variable explicitly and wins. Else a provider's own endpoint gets
    that provider's key, and any other server gets REINAGENT_SERVER_API_KEY: a hosted key is
    never sent to a server the user merely pointed at (a proxy, a colleague's vLLM, a typo).
    """
    note_url_credentials(base_url)  # sent as Basic auth: an echo of it is redacted too
    if api_key_env:
        note_credential_variable(api_key_env)  # its value is redacted from now on, whatever its name
        value = os.environ.get(api_key_env)
        if not value:
            raise ConfigError(f"--api-key-env names {api_key_env}, which is not set (or empty)")
        return value
    if is_provider_endpoint(base_url):
        host = (urlsplit((base_url or "").strip()).hostname or "").lower()
        return os.environ.get(PROVIDER_HOSTS[host]) or None
    return os.environ.get(SERVER_KEY_ENV) or None
