"""Building the Strands model from the ``model`` config, and naming what went wrong.

Nothing heavy is imported at module level: each provider imports its SDK when it is
built, so a missing pip extra becomes one clear :class:`ProviderError`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_apps.errors import AgentAppsError

from . import plain, reasoning, wire

PROVIDERS = ("bedrock", "anthropic", "openai", "ollama", "litellm")
DEFAULT_REGION = "us-west-2"
#: Anthropic's API requires max_tokens; the other providers default to the model's own.
DEFAULT_MAX_TOKENS = 4096
DEFAULT_READ_TIMEOUT = 60.0

_CREDENTIALS_HINT = (
    "set model.profile (or AWS_PROFILE) to a configured profile, export AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, run `aws sso login`, or put a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK"
)


class ProviderError(AgentAppsError):
    """The model provider cannot be used as configured: credentials, region, model,
    access, a missing pip extra, or a model error the agent chose not to retry."""

    def __init__(self, message: str, *, code: str | None = None, skill: str = "agent-strands") -> None:
        super().__init__(f"{skill}: {message}", skill=skill)
        self.reason = message
        self.code = code
        #: The provider's own exception, when there was one (for ``--debug`` and logs).
        self.original: BaseException | None = None

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.code:
            data["code"] = self.code
        return data


#: Providers whose Strands model class writes image attachments only (no documents).
_IMAGES_ONLY = frozenset({"ollama"})


def check_attachments(provider: str, parts: Any) -> None:
    """Refuse, before any model call, an attachment ``provider`` cannot send."""
    if provider not in _IMAGES_ONLY:
        return
    for part in parts:
        if part.get("type") != "image":
            raise ProviderError(
                f"model.provider {provider!r} takes image attachments only, not {part.get('name')!r} "
                f"(a {part.get('format')} document)",
                code="AttachmentUnsupported",
            )


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _missing_extra(extra: str, exc: ImportError) -> ProviderError:
    what = exc.name or str(exc)
    return ProviderError(
        f"model.provider needs the {what!r} package, which is not installed: pip install 'agent-apps[{extra}]'",
        code="MissingExtra",
    )


def require_strands() -> None:
    """Raise a clear error when the ``strands`` extra is not installed."""
    for module in ("strands", "boto3"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise _missing_extra("strands", exc) from None


# -- building ------------------------------------------------------------------------------


@dataclass
class Built:
    """A Strands model, where it runs, and how to abort and release it."""

    model: Any
    provider: str
    model_id: str
    region: str | None = None
    endpoint_url: str | None = None
    streaming: bool = True
    #: The client streams on the event loop (httpx): a stalled reply is aborted by
    #: cancelling the task that reads it, not by cutting a socket from another thread.
    streams_on_loop: bool = False
    _client: Any = None
    #: Releases what the model's library keeps beyond the run (awaited by :meth:`aclose`).
    _release: Callable[[], Awaitable[None]] | None = None
    #: Set while a reply streams when the provider's wire format said it did not end
    #: (the library made up a stop reason): the reply is then incomplete.
    unfinished: bool = False
    _responses: list[Any] = field(default_factory=list)
    _cut_responses: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _aborted: bool = False

    def abort(self) -> None:
        """Cut in-flight Bedrock streams (any thread), and every later one: the reader
        thread wakes at once instead of waiting for the next chunk or the read timeout."""
        with self._lock:
            self._aborted = True
        self.cut()

    def cut(self) -> None:
        """Cut the Bedrock streams in flight (any thread); later ones go ahead."""
        with self._lock:
            responses, self._responses = self._responses, []
            self._cut_responses += responses
        for raw in responses:
            _cut(raw)

    def close(self) -> None:
        """Close the client, and the connections of the streams cut (their reader
        threads, woken by the cut, are gone by now): the endpoint sees them closed."""
        with self._lock:
            responses, self._cut_responses = self._cut_responses, []
        for raw in responses:
            with contextlib.suppress(Exception):
                raw.close()
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # closing is best effort
                pass

    async def aclose(self) -> None:
        """:meth:`close`, and release the library's own clients (on the run's loop)."""
        self.close()
        if self._release is not None:
            await self._release()


def _cut(raw: Any) -> None:
    sock = _socket_of(raw)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _socket_of(raw: Any) -> Any:
    """The socket under a urllib3 response, if it still holds its connection."""
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    return getattr(connection, "sock", None)


def build_model(config: dict[str, Any]) -> Built:
    """The Strands model for ``config`` (blocking: run it in a thread)."""
    provider = str(config.get("provider") or "bedrock").lower()
    if provider not in PROVIDERS:
        raise ProviderError(
            f"unknown model.provider {provider!r}: use one of {', '.join(PROVIDERS)}", code="UnknownProvider"
        )
    builders = {"bedrock": _bedrock, "anthropic": _anthropic, "openai": _openai, "ollama": _ollama, "litellm": _litellm}
    return builders[provider](config)


def _sampling(config: dict[str, Any]) -> dict[str, Any]:
    return {key: config[key] for key in ("temperature", "top_p") if config.get(key) is not None}


def _bedrock(config: dict[str, Any]) -> Built:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ProfileNotFound
    from strands.models.bedrock import DEFAULT_BEDROCK_MODEL_ID, BedrockModel

    profile = config.get("profile") or None
    try:
        session = boto3.Session(profile_name=profile)
    except ProfileNotFound:
        name = profile or os.environ.get("AWS_PROFILE")
        setting = "model.profile" if profile else "AWS_PROFILE"
        raise ProviderError(
            f"AWS profile {name!r} is not in ~/.aws/config or ~/.aws/credentials: fix {setting}, "
            f"or create it with `aws configure --profile {name}`",
            code="ProfileNotFound",
        ) from None
    region = config.get("region") or session.region_name or os.environ.get("AWS_REGION") or DEFAULT_REGION
    endpoint_url = config.get("endpoint_url") or None
    if not endpoint_url and not _known_region(session, region):
        raise ProviderError(
            f"region {region!r} has no Amazon Bedrock endpoint: set model.region (or AWS_REGION) to a Bedrock "
            "region such as us-east-1 or us-west-2",
            code="UnknownRegion",
        )
    if profile or region != session.region_name:
        session = boto3.Session(profile_name=profile, region_name=region)
    api_key = config.get("api_key") or None
    if not api_key and not os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):
        try:
            credentials = session.get_credentials()
        except BotoCoreError as exc:
            raise ProviderError(f"cannot load AWS credentials ({_one_line(exc)}): {_CREDENTIALS_HINT}") from None
        if credentials is None:
            raise ProviderError(f"no AWS credentials found: {_CREDENTIALS_HINT}", code="NoCredentials")

    client_config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},  # the agent policy retries, through the hook
        read_timeout=float(config.get("read_timeout") or DEFAULT_READ_TIMEOUT),
        connect_timeout=float(config.get("connect_timeout") or 10),
    )
    model_id = str(config.get("model_id") or DEFAULT_BEDROCK_MODEL_ID)
    settings: dict[str, Any] = {"model_id": model_id, "streaming": bool(config.get("streaming", True))}
    settings.update(_sampling(config))
    if config.get("max_tokens"):  # else the model's own default
        settings["max_tokens"] = int(config["max_tokens"])
    fields = dict(config.get("params") or {})
    thinking = reasoning.budget(config)
    if thinking:
        fields["thinking"] = reasoning.enabled(thinking)
        settings["max_tokens"] = reasoning.max_tokens_above(config, thinking, DEFAULT_MAX_TOKENS)
    if fields:
        settings["additional_request_fields"] = fields
    model = BedrockModel(
        boto_session=session,
        boto_client_config=client_config,
        endpoint_url=endpoint_url,
        api_key=api_key,
        **settings,
    )
    built = Built(
        model,
        "bedrock",
        model_id,
        region=region,
        endpoint_url=endpoint_url,
        streaming=settings["streaming"],
        _client=model.client,
    )
    _track_streams(built)
    return built


def _known_region(session: Any, region: str) -> bool:
    known: set[str] = set()
    try:
        for partition in session.get_available_partitions():
            known.update(session.get_available_regions("bedrock-runtime", partition))
    except Exception:  # no endpoint data: let the request decide
        return True
    return not known or region in known


def _track_streams(built: Built) -> None:
    """Remember each ConverseStream response, so :meth:`Built.abort` can cut it."""
    client = built._client
    original = client.converse_stream

    def converse_stream(**kwargs: Any) -> Any:
        response = original(**kwargs)
        raw = getattr(response.get("stream"), "_raw_stream", None)
        if raw is not None:
            with built._lock:
                aborted = built._aborted
                if not aborted:
                    built._responses = [r for r in built._responses if _socket_of(r) is not None]
                    built._responses.append(raw)
            if aborted:  # cancelled while the request was on its way: cut it now
                _cut(raw)
        return response

    client.converse_stream = converse_stream


def _model_id(config: dict[str, Any], provider: str, example: str) -> str:
    model_id = config.get("model_id")
    if not model_id:
        raise ProviderError(
            f"model.provider {provider!r} needs model.model_id (for example {example!r})", code="NoModel"
        )
    return str(model_id)


def _read_timeout(config: dict[str, Any]) -> float:
    return float(config.get("read_timeout") or DEFAULT_READ_TIMEOUT)


def _api_key(config: dict[str, Any], provider: str, variable: str) -> dict[str, Any]:
    """The key for an HTTP API: ``model.api_key``, else the SDK reads ``variable``; a
    local server (``base_url`` set) needs none, a public API does (say so now, not at
    the first model call)."""
    if config.get("api_key"):
        return {"api_key": config["api_key"]}
    if os.environ.get(variable):
        return {}
    if config.get("base_url"):
        return {"api_key": "not-needed"}  # local servers (Ollama, vLLM, llama.cpp) ignore it
    raise ProviderError(
        f"model.provider {provider!r} needs an API key: export {variable}, or set model.api_key "
        "(or model.base_url for a local server)",
        code="NoCredentials",
    )


def _params(config: dict[str, Any], *, max_tokens: bool = True) -> dict[str, Any]:
    params = {**_sampling(config), **dict(config.get("params") or {})}
    if max_tokens and config.get("max_tokens"):
        params.setdefault("max_tokens", int(config["max_tokens"]))
    return params


def _anthropic(config: dict[str, Any]) -> Built:
    try:
        from strands.models.anthropic import AnthropicModel
    except ImportError as exc:
        raise _missing_extra("anthropic", exc) from None
    model_id = _model_id(config, "anthropic", "claude-sonnet-4-5")
    client_args: dict[str, Any] = _api_key(config, "anthropic", "ANTHROPIC_API_KEY")
    if config.get("base_url"):
        client_args["base_url"] = config["base_url"]
    # the agent policy retries, through the hook; a stalled read fails after read_timeout
    client_args.update(max_retries=0, timeout=_read_timeout(config), http_client=wire.anthropic_http_client())
    params = _params(config, max_tokens=False)
    max_tokens = int(config.get("max_tokens") or DEFAULT_MAX_TOKENS)
    thinking = reasoning.budget(config)
    if thinking:
        params["thinking"] = reasoning.enabled(thinking)
        max_tokens = reasoning.max_tokens_above(config, thinking, DEFAULT_MAX_TOKENS)
    model = AnthropicModel(client_args=client_args, model_id=model_id, max_tokens=max_tokens, params=params or None)
    streaming = bool(config.get("streaming", True))
    if not streaming:
        plain.plain_anthropic(model)
    built = Built(
        model, "anthropic", model_id, endpoint_url=config.get("base_url"), streaming=streaming, streams_on_loop=True
    )
    # The model keeps one client for its life; closed at the run's end, on its loop (left
    # to the collector, it would close itself on whatever loop runs then).
    built._release = model.client.close
    return built


def _openai(config: dict[str, Any]) -> Built:
    try:
        from strands.models.openai import OpenAIModel
    except ImportError as exc:
        raise _missing_extra("openai", exc) from None
    model_id = _model_id(config, "openai", "gpt-4o")
    client_args: dict[str, Any] = _api_key(config, "openai", "OPENAI_API_KEY")
    if config.get("base_url"):
        client_args["base_url"] = config["base_url"]
    client_args.update(max_retries=0, timeout=_read_timeout(config))
    params = _params(config)
    thinking = reasoning.budget(config)
    effort = reasoning.effort(model_id, thinking) if thinking else None
    if effort:
        params.setdefault("reasoning_effort", effort)
    built = Built(
        None,
        "openai",
        model_id,
        endpoint_url=config.get("base_url"),
        streaming=bool(config.get("streaming", True)),
        streams_on_loop=True,
    )
    client = wire.openai_client(client_args, built)
    built.model = OpenAIModel(client=client, model_id=model_id, params=params or None, stream=built.streaming)
    built._release = client.close  # one client for the run, closed on its loop
    return built


def _ollama(config: dict[str, Any]) -> Built:
    try:
        from strands.models.ollama import OllamaModel
    except ImportError as exc:
        raise _missing_extra("ollama", exc) from None
    client_args: dict[str, Any] = wire.ollama_client_args({"timeout": _read_timeout(config)})
    if config.get("api_key"):  # Ollama has none; a proxy in front of it may
        client_args["headers"] = {"Authorization": f"Bearer {config['api_key']}"}
    settings: dict[str, Any] = {"model_id": _model_id(config, "ollama", "qwen2.5-coder:14b"), **_sampling(config)}
    if config.get("max_tokens"):
        settings["max_tokens"] = int(config["max_tokens"])
    if config.get("params"):  # Ollama's model options: num_ctx, top_k, seed...
        settings["options"] = dict(config["params"])
    # base_url, else OLLAMA_HOST, else http://localhost:11434 (the ollama client decides)
    if reasoning.budget(config):  # Ollama thinks or not: no budget
        settings["additional_args"] = {"think": True}
    model = OllamaModel(config.get("base_url") or None, ollama_client_args=client_args, **settings)
    streaming = bool(config.get("streaming", True))
    built = Built(
        model,
        "ollama",
        settings["model_id"],
        endpoint_url=config.get("base_url"),
        streaming=streaming,
        streams_on_loop=True,
    )
    wire.watch_ollama(model, built)
    plain.ollama_turns(model, streaming)
    return built


def _litellm(config: dict[str, Any]) -> Built:
    # LiteLLM downloads a price list from GitHub on import unless told not to: a model
    # call must not wait for (or fail on) a network fetch nobody asked for.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from strands.models.litellm import LiteLLMModel
    except ImportError as exc:
        raise _missing_extra("litellm", exc) from None
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on errors
    client_args: dict[str, Any] = {"max_retries": 0, "timeout": _read_timeout(config)}
    if config.get("api_key"):
        client_args["api_key"] = config["api_key"]
    if config.get("base_url"):
        client_args["api_base"] = config["base_url"]
    params = _params(config)
    model_id = _model_id(config, "litellm", "anthropic/claude-sonnet-4-5")
    thinking = reasoning.budget(config)
    if thinking:
        for key, value in reasoning.litellm(model_id, thinking, config.get("base_url")).items():
            params.setdefault(key, value)
    streaming = bool(config.get("streaming", True))
    close_client = wire.litellm_clients({**config, "model_id": model_id}, client_args)
    model = LiteLLMModel(client_args=client_args, model_id=model_id, params=params or None, stream=streaming)
    with _litellm_runs_lock:
        _litellm_runs[0] += 1
    built = Built(
        model, "litellm", model_id, endpoint_url=config.get("base_url"), streaming=streaming, streams_on_loop=True
    )
    wire.watch_litellm(model, built)

    async def release() -> None:
        if close_client is not None:
            await close_client()
        await _release_litellm_clients()

    built._release = release
    return built


_litellm_runs = [0]
_litellm_runs_lock = threading.Lock()


async def _release_litellm_clients() -> None:
    """LiteLLM caches its HTTP clients per event loop and closes them only when they are
    evicted or collected, which then happens on some later loop (or none): "Event loop
    is closed" errors. When the last LiteLLM run of the process ends, close them here,
    on the loop they belong to, and forget them."""
    with _litellm_runs_lock:
        _litellm_runs[0] -= 1
        if _litellm_runs[0]:
            return
    import litellm

    try:
        await litellm.close_litellm_async_clients()
        litellm.in_memory_llm_clients_cache.flush_cache()
    except Exception:  # best effort: a client that will not close is left to the collector
        pass


# -- errors --------------------------------------------------------------------------------


@dataclass
class ModelFailure:
    """A failed model call: what the hook is told, and the one line a user gets."""

    type: str
    message: str
    retryable: bool
    line: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "retryable": self.retryable}

    def error(self, original: BaseException | None = None) -> ProviderError:
        error = ProviderError(self.line, code=self.type)
        error.original = original
        return error


_TRANSIENT_CODES = {
    "ThrottlingException",
    "TooManyRequestsException",
    "ServiceUnavailableException",
    "InternalServerException",
    "InternalFailure",
    "ModelTimeoutException",
    "ModelNotReadyException",
    "ModelStreamErrorException",
    "RequestTimeout",
    "RequestTimeoutException",
}
_CREDENTIAL_CODES = {
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "ExpiredTokenException",
    "ExpiredToken",
    "IncompleteSignature",
    "MissingAuthenticationTokenException",
    "InvalidClientTokenId",
}


def classify(exc: BaseException, built: Built) -> ModelFailure:
    """Describe a model-call failure (any provider) for the hook and for the user."""
    where = f"model {built.model_id!r}"
    if built.region:
        where += f" in region {built.region!r}"
    elif built.endpoint_url and built.provider != "bedrock":
        where += f" at {built.endpoint_url}"
    # strands wraps some errors (throttling, context overflow): look at the whole chain
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    names = {type(e).__name__ for e in chain}

    if "OutputTooLarge" in names:
        return ModelFailure(
            "OutputTooLarge",
            _one_line(exc),
            False,
            f"{where}: {_one_line(exc)}: raise model.max_output_kb if the model's answers are that long",
        )
    if "IncompleteReply" in names or "JSONDecodeError" in names:  # a reply cut off, or mangled
        return ModelFailure(
            "IncompleteReply", _one_line(exc), True, f"{where} did not finish its reply: {_one_line(exc)}"
        )
    redirect = _redirect(chain)
    if redirect is not None:
        setting = "model.endpoint_url" if built.provider == "bedrock" else "model.base_url"
        return ModelFailure(
            "Redirected",
            _one_line(exc),
            False,
            f"the endpoint of {where} redirected the request{redirect}, and agent-apps does not follow a model "
            f"endpoint's redirects (the conversation and your key go only to the host configured): set {setting} "
            "to the address you mean",
        )

    if "ContextWindowOverflowException" in names:
        return ModelFailure(
            "ContextWindowOverflowException",
            _one_line(exc),
            False,
            f"the conversation no longer fits the context window of {where}: set model.context_edit: true, "
            "or use a model with a larger window",
        )
    if "MaxTokensReachedException" in names:
        return ModelFailure(
            "MaxTokensReachedException",
            _one_line(exc),
            False,
            f"{where} hit model.max_tokens before finishing its reply: raise model.max_tokens",
        )

    client_error = next((e for e in chain if hasattr(e, "response") and isinstance(e.response, dict)), None)
    if client_error is not None and "Error" in client_error.response:
        details = client_error.response.get("Error") or {}
        code = str(details.get("Code") or type(client_error).__name__)
        code = code[:1].upper() + code[1:]  # event-stream errors come camel-cased
        message = _one_line(details.get("Message") or client_error)
        return _classify_code(code, message, where, built)

    status = _http_status(chain)
    if status is not None:
        return _classify_status(status, _one_line(exc), where, built)

    if names & {"ModelThrottledException", "RateLimitError"}:
        return ModelFailure(
            "ThrottlingException",
            _one_line(exc),
            True,
            f"{where} kept throttling requests: wait, raise your quota, or lower the request rate",
        )
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"} or any(
        "Token" in n and ("Retrieval" in n or "SSO" in n) for n in names
    ):
        return ModelFailure("NoCredentials", _one_line(exc), False, f"AWS credentials unusable: {_CREDENTIALS_HINT}")
    if "EndpointConnectionError" in names:
        return ModelFailure(
            "EndpointConnectionError",
            _one_line(exc),
            True,
            f"cannot reach the model endpoint for {where} ({_one_line(exc)}): check the network, model.region "
            "and model.endpoint_url",
        )
    transient = {
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
        "ProtocolError",
        "APIConnectionError",
        "APITimeoutError",
        "InternalServerError",
        "ServiceUnavailableError",
        "Timeout",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "RemoteProtocolError",
        "ConnectionError",
    }
    kind = next((type(e).__name__ for e in chain if type(e).__name__ in transient), None)
    if kind is not None:
        return ModelFailure(
            kind, _one_line(exc), True, f"{where} did not answer ({kind}: {_one_line(exc)}): check the network"
        )
    if names & {"AuthenticationError", "PermissionDeniedError"}:
        return ModelFailure(
            "AuthenticationError",
            _one_line(exc),
            False,
            f"the {built.provider} API rejected the credentials: set model.api_key or the provider's API key "
            "environment variable",
        )
    if "NotFoundError" in names:
        return ModelFailure(
            "NotFoundError", _one_line(exc), False, f"{where} was not found: set model.model_id to a model you can use"
        )
    kind = type(exc).__name__
    return ModelFailure(kind, _one_line(exc), False, f"{where} failed: {kind}: {_one_line(exc)}")


#: Error types and codes reported in a body (an error inside a stream has no status of its own).
_BODY_STATUS = {
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "server_error": 500,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
}
_API_NAMES = {"anthropic": "the Anthropic API", "openai": "the OpenAI API", "ollama": "Ollama", "litellm": "LiteLLM"}
_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_OVERFLOW_WORDS = ("context length", "context window", "too long", "maximum context", "context_length_exceeded")


def _redirect(chain: list[BaseException]) -> str | None:
    """``" (status 307, to URL)"`` when the model call failed on an HTTP redirect, else None."""
    for error in chain:
        response = getattr(error, "response", None)
        status = getattr(error, "status_code", None)
        headers: Any = getattr(response, "headers", None)
        if isinstance(response, dict):  # botocore
            metadata = response.get("ResponseMetadata") or {}
            status, headers = metadata.get("HTTPStatusCode"), metadata.get("HTTPHeaders")
        if isinstance(status, int) and 300 <= status < 400:
            location = headers.get("location") if hasattr(headers, "get") else None
            where = f", to {_one_line(location)[:200]}" if location else ""
            return f" (status {status}{where})"
    return None


def _http_status(chain: list[BaseException]) -> int | None:
    """The HTTP status of an HTTP API's error (the SDKs of Anthropic, OpenAI, Ollama and
    LiteLLM all carry ``status_code``); for an error reported inside a stream (status
    200 or -1, or none), the status its body's error type stands for."""
    for error in chain:
        status = getattr(error, "status_code", None)
        in_stream = status in (200, -1) or (status is None and type(error).__name__ == "APIError")
        if isinstance(status, int) and not in_stream:
            return status
        if in_stream:
            body = getattr(error, "body", None)
            if isinstance(body, dict):
                inner = body.get("error")
                details = inner if isinstance(inner, dict) else body
                for key in ("type", "code"):
                    known = _BODY_STATUS.get(str(details.get(key)))
                    if known:
                        return known
            return 500  # the stream broke on the server's side
    return None


def _classify_status(status: int, message: str, where: str, built: Built) -> ModelFailure:
    """An HTTP API's error, by status: the same retry decisions as Bedrock's codes."""
    api = _API_NAMES.get(built.provider, built.provider)
    if status == 429:
        return ModelFailure(
            "ThrottlingException",
            message,
            True,
            f"{api} kept rate-limiting {where} ({message}): wait, raise your rate limit, or lower the request rate",
        )
    if status in (408, 409) or status >= 500:
        return ModelFailure(
            "ServiceUnavailableException", message, True, f"{api} failed on {where} (status {status}: {message})"
        )
    if status in (401, 403):
        variable = _KEY_VARIABLES.get(built.provider, "the provider's API key variable")
        return ModelFailure(
            "AuthenticationError",
            message,
            False,
            f"{api} rejected the credentials for {where} (status {status}: {message}): set model.api_key or {variable}",
        )
    if status == 404:
        hint = f" (`ollama pull {built.model_id}`)" if built.provider == "ollama" else ""
        return ModelFailure(
            "NotFoundError",
            message,
            False,
            f"{where} was not found ({message}): set model.model_id to a model {api} serves{hint}",
        )
    if any(word in message.lower() for word in _OVERFLOW_WORDS):
        return ModelFailure(
            "ContextWindowOverflowException",
            message,
            False,
            f"the conversation no longer fits the context window of {where}: set model.context_edit: true, "
            "or use a model with a larger window",
        )
    line = f"{api} rejected the request for {where} (status {status}: {message})"
    return ModelFailure("BadRequest", message, False, line)


def _classify_code(code: str, message: str, where: str, built: Built) -> ModelFailure:
    if code == "ThrottlingException" or code == "TooManyRequestsException":
        return ModelFailure(
            code,
            message,
            True,
            f"Amazon Bedrock kept throttling {where} ({message}): wait, request a higher quota, "
            "or use a cross-region inference profile (model_id starting with 'us.' or 'global.')",
        )
    if code in _TRANSIENT_CODES:
        return ModelFailure(code, message, True, f"Amazon Bedrock failed on {where}: {code}: {message}")
    if code == "AccessDeniedException":
        return ModelFailure(
            code,
            message,
            False,
            f"access denied to {where} ({message}): enable the model under 'Model access' in the Bedrock console "
            "and allow bedrock:InvokeModel and bedrock:InvokeModelWithResponseStream for your AWS identity, "
            "or set model.model_id to a model you can use",
        )
    if code in _CREDENTIAL_CODES:
        return ModelFailure(
            code, message, False, f"AWS rejected the credentials ({code}: {message}): {_CREDENTIALS_HINT}"
        )
    if code in ("ValidationException", "ResourceNotFoundException") and (
        "model identifier is invalid" in message or code == "ResourceNotFoundException"
    ):
        return ModelFailure(
            code,
            message,
            False,
            f"unknown {where} ({message}): set model.model_id to a Bedrock model or inference profile id "
            "available there (`aws bedrock list-inference-profiles` lists them)",
        )
    if code == "ValidationException" and "on-demand throughput" in message:
        return ModelFailure(
            code,
            message,
            False,
            f"{where} cannot be called on demand: set model.model_id to its inference profile id "
            f"(for example 'us.{built.model_id}')",
        )
    return ModelFailure(code, message, False, f"Amazon Bedrock rejected the request for {where}: {code}: {message}")
