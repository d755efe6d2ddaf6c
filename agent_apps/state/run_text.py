"""``agent-apps runs show RUN``: what happened in a run, on a terminal.

For every agent of the run, nested as they started one another: its user message, then
turn by turn the model's reasoning and text, the code of each invoke call, each host
call that code made with its args and result or error and latency, the result the model
read, and the turn's timings, tokens and cost; then the agent's result or error. Every
line is cut to the terminal's width and long texts to a few lines (``--json`` has all
of it), and everything from the run is shown with the characters that could steer a
terminal escaped (see :mod:`agent_apps.terminal`): run content is untrusted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from ..terminal import printable
from .run_view import clock, duration, money, token_counts

if TYPE_CHECKING:
    from .run_view import AgentNode, RunView

__all__ = ["write_run"]

#: Lines shown of one text (the model's text, a result); code gets more.
TEXT_LINES = 8
CODE_LINES = 40


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _cut_note(entry: dict[str, Any], field: str) -> str:
    size = entry.get(field + "_cut")
    return f" [cut: {size:,} characters in all]" if size else ""


class _Writer:
    """Lines, indented, escaped and cut to the width."""

    def __init__(self, out: TextIO, width: int) -> None:
        self.out = out
        self.width = max(40, width)

    def line(self, indent: int, text: str, *, cut: bool = True) -> None:
        """One line; ``cut=False`` for a command to copy, which must stay whole."""
        text = printable(" " * indent + text)
        if cut and len(text) > self.width:
            text = text[: self.width - 1] + "…"
        self.out.write(text.rstrip() + "\n")

    def facts(self, indent: int, facts: list[str]) -> None:
        """Facts joined by `` · ``, wrapped between facts to the width (the lines after
        the first indented two more)."""
        lines: list[str] = []
        for fact in facts:
            pad = indent if len(lines) == 1 else indent + 2
            if lines and pad + len(lines[-1]) + 3 + len(fact) <= self.width:
                lines[-1] += " · " + fact
            else:
                lines.append(fact)
        for number, line in enumerate(lines):
            self.line(indent if number == 0 else indent + 2, line)

    def block(self, indent: int, label: str, text: str, limit: int, mark: str = "") -> None:
        """``label`` and a multi-line text, at most ``limit`` lines of it."""
        lines = text.splitlines() or [""]
        if label:
            self.line(indent, f"{label}: {lines[0]}" if len(lines) == 1 else f"{label}:")
            if len(lines) == 1:
                return
        for line in lines[:limit]:
            self.line(indent + 2, f"{mark}{line}")
        if len(lines) > limit:
            self.line(indent + 2, f"{mark}… {len(lines) - limit} more lines (--json has them)")


def write_run(view: RunView, out: TextIO, width: int) -> None:
    """Write the run ``view`` to ``out``, lines cut to ``width`` characters."""
    run, w = view.run, _Writer(out, width)
    w.line(0, f"run {run.id}: {view.status}")
    facts = [run.name, f"session {run.session_id}" if run.session_id else "no session"]
    if run.tenant_id:
        facts.append(f"tenant {run.tenant_id}")
    facts.append(f"started {clock(run.started_at)}")
    if run.ended_at:
        facts.append(f"took {duration((run.ended_at - run.started_at) * 1000)}")
    else:
        facts.append("its process died" if run.status == "interrupted" else "running")
    facts.append(f"{token_counts({'input_tokens': run.input_tokens, 'output_tokens': run.output_tokens})} tokens")
    if run.cost_usd:
        facts.append(money(run.cost_usd))
    w.facts(2, facts)
    pending = view.pending
    if pending is not None:
        w.line(2, f"waiting for approval of {pending.get('skill')} {_json(pending.get('args'))}")
        w.line(4, f"asked by agent {pending.get('agent_name')}, rule {pending.get('rule')}")
        decided = view.decision
        if decided:
            w.line(4, f"decided: {decided['action']}" + (f" ({decided['reason']})" if decided.get("reason") else ""))
        else:
            w.line(4, f"decide with: agent-apps approve {run.id} [--deny REASON | --skip | --result JSON]", cut=False)
    for root in view.roots:
        out.write("\n")
        _agent(w, root, 0)


def _agent(w: _Writer, node: AgentNode, indent: int) -> None:
    info, report = node.info, node.report
    facts = [f"agent {info.name} [{info.id}] {info.status}"]
    facts += [str(report[key]) for key in ("provider", "model") if report.get(key)]
    if info.session_id:
        facts.append(f"session {info.session_id}")
    if node.duration_s is not None:
        facts.append(duration(node.duration_s * 1000))
    w.facts(indent, facts)
    if "user_message" in report:
        w.block(indent + 2, "user", str(report["user_message"]), TEXT_LINES)
    shown: set[str] = set()
    for step in node.steps:
        _step(w, node, step, indent + 2, shown)
    for call, nested in node.by_call.items():  # started by a call the report does not list
        for child in nested if call not in shown else ():
            _agent(w, child, indent + 2)
    for child in node.children:
        _agent(w, child, indent + 2)
    if report.get("compaction"):
        w.line(indent + 2, f"compaction: {_json(report['compaction'])}")
    if report.get("message"):  # why it stopped before its end (a stop's reason, a limit)
        w.line(indent + 2, str(report["message"]))
    error = report.get("error")
    if error:
        message = error.get("message") or ""
        w.block(indent + 2, "error", f"{error.get('type')}: {message}".rstrip(": ") + _cut_note(error, "message"), 4)
    elif "result" in report:
        value = report["result"]
        text = value if isinstance(value, str) else _json(value)
        w.block(indent + 2, "result", text + _cut_note(report, "result"), TEXT_LINES)
    if info.trace:
        w.line(indent + 2, f"trace: {len(info.trace)} events (--json shows them)")


def _step(w: _Writer, node: AgentNode, step: dict[str, Any], indent: int, shown: set[str]) -> None:
    usage = step.get("usage") or {}
    facts = [f"turn {step.get('turn')}"]
    if step.get("live"):
        facts.append("in progress")
    else:
        facts.append(f"model {duration(step.get('model_latency_ms'))}")
        if step.get("tool_calls"):
            facts.append(f"tools {duration(step.get('tool_ms'))}")
        facts.append(f"{token_counts(usage)} tokens")
        if step.get("cost_usd") is not None:
            facts.append(money(step["cost_usd"]))
        facts.append(str(step.get("finish_reason")))
    if step.get("replayed"):
        facts.append("replayed")
    w.facts(indent, facts)
    if step.get("reasoning"):
        w.block(indent + 2, "reasoning", step["reasoning"] + _cut_note(step, "reasoning"), TEXT_LINES)
    if step.get("text"):
        w.block(indent + 2, "text", step["text"] + _cut_note(step, "text"), TEXT_LINES)
    for call in step.get("tool_calls") or ():
        _tool_call(w, node, call, indent + 2, shown)


def _tool_call(w: _Writer, node: AgentNode, call: dict[str, Any], indent: int, shown: set[str]) -> None:
    failed = " error" if call.get("error") else ""
    w.line(indent, f"▸ {call.get('tool')} · {duration(call.get('latency_ms'))}{failed}")
    args = call.get("args") or {}
    code = args.get("code")
    if isinstance(code, str):
        w.block(indent, "", code + _cut_note(args, "code"), CODE_LINES, mark="│ ")
    elif args:
        w.line(indent + 2, f"args: {_json(args)}")
    for host in call.get("host_calls") or ():
        shown.add(str(host.get("id")))
        _host_call(w, host, indent + 2)
        for child in node.by_call.get(str(host.get("id")), ()):
            _agent(w, child, indent + 4)
    if call.get("host_calls_cut"):
        w.line(indent + 2, f"… {call['host_calls_cut']} more host calls (not recorded)")
    if "result" in call:
        w.block(indent + 2, "result", str(call["result"]) + _cut_note(call, "result"), TEXT_LINES)
    elif call.get("error") is True:
        w.line(indent + 2, f"result: an error ({call.get('result_size', 0)} bytes)")
    elif "result_size" in call:
        w.line(indent + 2, f"result: {call['result_size']} bytes")


def _host_call(w: _Writer, host: dict[str, Any], indent: int) -> None:
    """One line when it fits the width, else the args and the outcome on lines of their own."""
    head = f"→ {host.get('skill')} · {duration(host.get('latency_ms'))}"
    args = f"{_json(host['args'])}{_cut_note(host, 'args')}" if "args" in host else ""
    status = host.get("status")
    if status == "ok":
        outcome = f"= {_json(host['result'])}{_cut_note(host, 'result')}" if "result" in host else "ok"
    elif status == "running":
        outcome = "(running)"
    else:
        error = host.get("error") or {}
        message = f": {error['message']}" if error.get("message") else ""
        outcome = f"✗ {status if status == 'waiting-approval' else error.get('type')}{message}"
    one = f"→ {host.get('skill')} {args} {outcome} · {duration(host.get('latency_ms'))}".replace("  ", " ")
    if indent + len(one) <= w.width and "\n" not in one:
        w.line(indent, one)
        return
    w.line(indent, head)
    if args:
        w.line(indent + 4, f"args {args}")
    w.line(indent + 4, outcome)
