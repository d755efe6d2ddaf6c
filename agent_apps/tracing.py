"""OpenTelemetry spans for runs, turns, model calls and skill invocations (optional).

Tracing is on when the program has set an OpenTelemetry tracer provider (the ``otel``
extra installs the SDK; ``agent-apps`` itself sets one up from the standard ``OTEL_*``
environment variables, see :func:`configure_from_env`). Until then nothing here imports
OpenTelemetry and every call is a cheap no-op: a program that never configured tracing
pays one dictionary lookup per invocation.

Spans follow the tree of invocations, not the task that happens to run them (calls
from sandboxed code run as tasks of their own): each invocation's span is a child of
its parent invocation's, so one run is one trace. While a skill runs, its span is the
current OpenTelemetry context, so spans others make below it (Strands' model and
tool spans, an instrumented HTTP client) join the same trace.

A callback a provider calls (the agent's ``invoke`` tool, its hook) nests under the
provider's span of the moment when that span is in the same trace: the code a tool call
runs, and the skills it calls, hang under Strands' ``execute_tool invoke``.

Span names: ``invoke NAME`` per skill invocation, ``turn N`` per model turn and
``chat MODEL`` per model request (the provider's own span for it is left out: each model
call appears once). Attributes use the ``agent_apps.`` prefix (run id, agent id, depth,
skill), and the GenAI semantic conventions where they apply (:func:`gen_ai`): the
``agent`` span is ``invoke_agent``, a model call ``chat`` with the model, the provider
and the token usage, the ``invoke`` tool's callback ``execute_tool``. Their names come
from the ``opentelemetry-semantic-conventions`` package.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "Span",
    "annotate",
    "configure_from_env",
    "end",
    "gen_ai",
    "start_invocation",
    "start_span",
    "trace_id",
    "tracer",
]

_tracer: Any = None


def tracer() -> Any:
    """The agent-apps tracer once a real tracer provider is set, else None."""
    global _tracer
    if _tracer is not None:
        return _tracer
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody imported OpenTelemetry: tracing cannot be configured
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    from . import __version__

    _tracer = provider.get_tracer("agent_apps", __version__)
    return _tracer


class Span:
    """A started span and, while its invocation runs, the context token that made it
    current."""

    __slots__ = ("span", "token")

    def __init__(self, span: Any, token: Any = None) -> None:
        self.span = span
        self.token = token


def start_invocation(ctx: Context) -> Span | None:
    """The span of one skill invocation (current until :func:`end`), or None.

    Without OpenTelemetry imported it is None at once: this runs for every host call."""
    t = _tracer
    if t is None and "opentelemetry.trace" in sys.modules:
        t = tracer()
    if t is None:
        return None
    from opentelemetry import context, trace

    parent = _parent_span(ctx.parent)
    if parent is not None and ctx.skill.kind == "callback":  # a provider calling back: under its span
        current = trace.get_current_span()
        here = current.get_span_context()
        if here.is_valid and here.trace_id == parent.get_span_context().trace_id:
            parent = current
    parent_context = trace.set_span_in_context(parent) if parent is not None else None
    span = t.start_span(
        f"invoke {ctx.skill.name}",
        context=parent_context,
        attributes={"agent_apps.skill": ctx.skill.name, "agent_apps.kind": ctx.skill.kind},
    )
    return Span(span, context.attach(trace.set_span_in_context(span)))


def start_span(name: str, parent: Span | Any | None, attributes: dict[str, Any] | None = None) -> Span | None:
    """A span that is not an invocation (a turn, a model call), child of ``parent``
    (a :class:`Span`, a Context or None); not made current."""
    t = tracer()
    if t is None:
        return None
    from opentelemetry import trace

    parent_span = parent.span if isinstance(parent, Span) else _parent_span(parent)
    parent_context = trace.set_span_in_context(parent_span) if parent_span is not None else None
    return Span(t.start_span(name, context=parent_context, attributes=_clean(attributes or {})))


def annotate(span: Span | None, attributes: dict[str, Any]) -> None:
    if span is not None:
        span.span.set_attributes(_clean(attributes))


def gen_ai(
    span: Span | None,
    operation: str | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = None,
) -> None:
    """Set the GenAI semantic-convention attributes of ``span`` (a no-op without one).

    ``provider`` is also ``gen_ai.system``, its older name, which tools still read; a
    provider the conventions name (``bedrock``, ``anthropic``, ``openai``) takes their
    value (``aws.bedrock``...)."""
    if span is None:
        return
    try:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
    except ImportError:  # an SDK without the conventions package: the agent_apps.* attributes stay
        return

    attributes: dict[str, Any] = {}
    if operation is not None:
        attributes[g.GEN_AI_OPERATION_NAME] = operation
    if provider is not None:
        known = {"bedrock": g.GenAiProviderNameValues.AWS_BEDROCK, "anthropic": g.GenAiProviderNameValues.ANTHROPIC}
        named = known.get(provider) or getattr(g.GenAiProviderNameValues, provider.upper(), None)
        attributes[g.GEN_AI_PROVIDER_NAME] = attributes[g.GEN_AI_SYSTEM] = named.value if named else provider
    for name, value in ((g.GEN_AI_REQUEST_MODEL, model), (g.GEN_AI_AGENT_NAME, agent), (g.GEN_AI_TOOL_NAME, tool)):
        if value is not None:
            attributes[name] = value
    for name, key in ((g.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens"), (g.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens")):
        if usage and isinstance(usage.get(key), int):
            attributes[name] = usage[key]
    if isinstance(finish_reason, str):
        attributes[g.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reason]
    span.span.set_attributes(attributes)


def end(span: Span | None, error: BaseException | None = None) -> None:
    """End ``span`` (recording ``error`` as its status) and restore the context."""
    if span is None:
        return
    if span.token is not None:
        from opentelemetry import context

        context.detach(span.token)
        span.token = None
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
    span.span.end()


def trace_id(ctx: Context) -> str | None:
    """The trace id (32 hex digits) of ``ctx``'s span, if it is recorded."""
    span = getattr(ctx, "span", None)
    if span is None:
        return None
    context = span.span.get_span_context()
    return format(context.trace_id, "032x") if context.trace_id else None


def configure_from_env() -> bool:
    """Set up an SDK tracer provider from the standard environment variables
    (``OTEL_TRACES_EXPORTER``: ``console`` or ``otlp``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_SERVICE_NAME``), as the ``agent-apps`` command does; False when they ask for
    nothing. Needs the ``otel`` extra (and ``opentelemetry-exporter-otlp`` for otlp)."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "")
    if not exporter_name and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporter_name = "otlp"
    if exporter_name in ("", "none") or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        from .errors import ConfigError

        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={exporter_name} needs OpenTelemetry: pip install 'agent-apps[otel]'"
        ) from None
    if exporter_name == "console":  # on stderr: stdout is the result's
        exporter: Any = ConsoleSpanExporter(out=sys.stderr)
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            from .errors import ConfigError

            raise ConfigError(
                "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: pip install opentelemetry-exporter-otlp-proto-http"
            ) from None
        exporter = OTLPSpanExporter()
    else:
        from .errors import ConfigError

        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: agent-apps knows 'console', 'otlp' and 'none'")
    service = os.environ.get("OTEL_SERVICE_NAME", "agent-apps")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _parent_span(ctx: Context | None) -> Any:
    """The span of the nearest invocation at or above ``ctx`` that has one."""
    while ctx is not None:
        span = getattr(ctx, "span", None)
        if span is not None:
            return span.span
        ctx = ctx.parent
    return None


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if isinstance(v, (str, bool, int, float))}
