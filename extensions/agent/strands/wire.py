"""Each HTTP model API's client, held to what agent-apps allows a model endpoint.

Two things the API libraries do by themselves are not allowed (docs/security.md, "What
a peer can do"):

* **Following a redirect.** The Anthropic, OpenAI, Ollama and LiteLLM clients follow a
  ``307`` to wherever it points, with the request body (the whole conversation) and, for
  keys in their own headers (Anthropic's ``X-Api-Key``), the key. Here every client is
  built with redirects off: a redirect fails the model call with the address it pointed
  to, and nothing is sent there.
* **Making up a stop reason.** When a streamed reply ends without one (the server cut
  it off), the OpenAI and Ollama model classes of Strands and LiteLLM itself report
  ``end_turn``/``stop`` anyway. Here each watches its wire format and sets
  ``Built.unfinished``, so the reply is an error the agent may retry
  (:class:`~.calls.IncompleteReply`), never a result.

Bedrock needs neither: botocore follows no redirects, and Strands reports a Bedrock
stream without ``messageStop`` as it is.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Built

__all__ = [
    "anthropic_http_client",
    "litellm_clients",
    "ollama_client_args",
    "openai_client",
    "watch_litellm",
    "watch_ollama",
]


def anthropic_http_client() -> Any:
    """The HTTP client of an Anthropic model: the SDK's own, without redirects."""
    import anthropic

    return anthropic.DefaultAsyncHttpxClient(follow_redirects=False)


def openai_client(client_args: dict[str, Any], built: Built) -> Any:
    """One ``AsyncOpenAI`` for the run (Strands would make one per request, with
    redirects on), whose streamed replies say whether they ended (``finish_reason``)."""
    import openai

    client = openai.AsyncOpenAI(**client_args, http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False))
    completions = client.chat.completions
    create = completions.create

    @functools.wraps(create)
    async def watched_create(*args: Any, **kwargs: Any) -> Any:
        response = await create(*args, **kwargs)
        return _FinishWatch(response, built) if kwargs.get("stream") else response

    completions.create = watched_create
    return client


class _FinishWatch:
    """An OpenAI stream that marks the reply unfinished until a choice has a
    ``finish_reason`` (Strands reads a stream without one as ``end_turn``)."""

    def __init__(self, stream: Any, built: Built) -> None:
        self._stream = stream
        self._built = built
        built.unfinished = True

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        async for event in self._stream:
            if any(getattr(choice, "finish_reason", None) for choice in getattr(event, "choices", None) or ()):
                self._built.unfinished = False
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def ollama_client_args(client_args: dict[str, Any]) -> dict[str, Any]:
    """The Ollama client's arguments, without redirects (it follows them by default)."""
    return {**client_args, "follow_redirects": False}


def watch_ollama(model: Any, built: Built) -> None:
    """Mark an Ollama reply unfinished until its last line says ``done: true`` (Strands
    makes up ``end_turn`` for a stream that just stops)."""
    format_chunk = model.format_chunk

    def watched(event: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if event.get("chunk_type") == "message_start":
            built.unfinished = True
        elif event.get("chunk_type") == "metadata":
            built.unfinished = not getattr(event.get("data"), "done", False)
            if built.unfinished:  # a line without the counts, which Strands would add up
                return {"metadata": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {}}}
        return format_chunk(event, *args, **kwargs)

    model.format_chunk = watched


# -- LiteLLM -------------------------------------------------------------------------------

#: The streams LiteLLM returned to this task's current model call (see :func:`watch_litellm`).
_litellm_streams: ContextVar[list[Any] | None] = ContextVar("agent_apps_litellm_streams", default=None)


def litellm_clients(config: dict[str, Any], client_args: dict[str, Any]) -> Callable[[], Awaitable[None]] | None:
    """Hand LiteLLM a client without redirects (in ``client_args["client"]``), of the
    kind its provider takes: ``AsyncOpenAI`` for OpenAI-compatible providers, its own
    ``AsyncHTTPHandler`` for those it drives over HTTP itself. Azure's providers take an
    Azure SDK client and keep LiteLLM's. Returns what closes the client at the run's end."""
    import litellm
    import openai
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    model_id = str(config["model_id"])
    try:
        _, provider, key, base = litellm.get_llm_provider(model_id, api_base=config.get("base_url"))
    except Exception:  # LiteLLM does not know the model: its own call will say so
        return None
    timeout = client_args.get("timeout")
    if provider == "openai" or provider in litellm.openai_compatible_providers:
        client = openai.AsyncOpenAI(
            api_key=config.get("api_key") or key or None,
            base_url=config.get("base_url") or base or None,
            max_retries=0,
            timeout=timeout,
            http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False),
        )
        client_args["client"] = client
        return client.close  # type: ignore[no-any-return]
    if provider.startswith("azure"):
        return None
    handler = AsyncHTTPHandler(timeout=timeout, follow_redirects=False)
    client_args["client"] = handler
    return handler.close  # type: ignore[no-any-return]


def watch_litellm(model: Any, built: Built) -> None:
    """Mark a LiteLLM reply unfinished when the provider sent no finish reason (LiteLLM
    then reports ``stop`` of its own). LiteLLM's stream wrapper keeps what the provider
    sent; :func:`_record_litellm_streams` hands it over to this model's call."""
    import litellm

    _record_litellm_streams(litellm)
    stream = model.stream

    async def watched(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        replies: list[Any] = []
        _litellm_streams.set(replies)
        try:
            async for chunk in stream(*args, **kwargs):
                if "messageStop" in chunk and replies:
                    reply = replies[-1]  # without these attributes (another LiteLLM), it cannot tell
                    received = getattr(reply, "received_finish_reason", "unknown")
                    built.unfinished = not (received or getattr(reply, "intermittent_finish_reason", None))
                yield chunk
        finally:
            _litellm_streams.set(None)

    model.stream = watched


def _record_litellm_streams(litellm: Any) -> None:
    """Once per process: ``litellm.acompletion`` also hands its reply to the model call
    of agent-strands that made it (a no-op for every other caller of LiteLLM)."""
    original = litellm.acompletion
    if getattr(original, "_agent_apps", False):
        return

    @functools.wraps(original)
    async def acompletion(*args: Any, **kwargs: Any) -> Any:
        response = await original(*args, **kwargs)
        replies = _litellm_streams.get()
        if replies is not None:
            replies.append(response)
        return response

    acompletion._agent_apps = True  # type: ignore[attr-defined]
    litellm.acompletion = acompletion
