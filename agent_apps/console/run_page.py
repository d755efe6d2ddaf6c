"""A run's page: its head, the call waiting for approval, a timeline of its agents, and
each agent turn by turn (text, reasoning, highlighted code, host calls, results).

The page is cut into **fragments**, each an element with an id and a fingerprint of the
data it shows: the head, the approval panel, the timeline, and for each agent shown at
the top level (an outermost agent, or one no recorded host call started) its head, each
of its turns and its end. An agent that a host call started is shown inside that call,
so a change to it is a change to the turn that holds the call. The first view renders
every fragment; a live update (:mod:`agent_apps.console.live`) renders only those whose
fingerprint changed, and the page swaps them in by id.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..state.run_view import AgentNode, RunView, duration, token_counts
from .highlight import highlight
from .html import Html, cost, esc, join, json_text, tag, url, when

if TYPE_CHECKING:
    from .workers import Worker

__all__ = ["Fragment", "fragments", "run_main"]


@dataclass
class Fragment:
    """One swappable part of the page: the element ``id``, the element to append it to
    when the page has none yet (``parent``), and a fingerprint of what it shows."""

    id: str
    parent: str
    key: str
    render: Callable[[], Html]


def dom_id(agent_id: str) -> str:
    """An element id for an agent (ids of imported runs may hold any character)."""
    return "a" + hashlib.sha1(agent_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def _key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


def fragments(view: RunView, worker: Worker | None, csrf: str) -> list[Fragment]:
    """Every fragment of the run's page, in page order."""
    run, pending = view.run, view.pending
    out = [
        Fragment(
            "run-head", "run", _key(run.to_json(), view.status), lambda: _head(view)
        ),
        Fragment(
            "approval",
            "run",
            _key(view.status, pending, view.decision, worker and worker.state()),
            lambda: _approval(view, worker, csrf),
        ),
        Fragment(
            "timeline",
            "run",
            _key([(a.id, a.seq, a.status) for a in view.agents], run.ended_at, run.status),
            lambda: _timeline(view),
        ),
    ]
    for root in view.roots:
        out += _agent_fragments(root, "agents")
    return out


def _agent_fragments(node: AgentNode, parent: str) -> list[Fragment]:
    """An agent at the top level: one fragment for a new one, else its parts."""
    ident = dom_id(node.info.id)
    out = [Fragment(f"{ident}", parent, _key("agent", node.info.id), lambda: _agent(node, top=True))]
    info = node.info
    out.append(
        Fragment(
            f"{ident}-head",
            ident,
            _key(info.status, info.ended_at, info.session_id, _head_facts(node)),
            lambda: _agent_head(node),
        )
    )
    for index, step in enumerate(node.steps):
        out.append(
            Fragment(
                f"{ident}-t{index}",
                f"{ident}-turns",
                _key(step, _nested_state(node, step)),
                lambda step=step: _turn(node, step),  # type: ignore[misc]
            )
        )
    report = node.report
    out.append(
        Fragment(
            f"{ident}-foot",
            ident,
            _key(report.get("result"), report.get("error"), report.get("compaction"), len(node.info.trace or ())),
            lambda: _agent_foot(node),
        )
    )
    for child in node.children:
        out += _agent_fragments(child, f"{ident}-children")
    return out


def _nested_state(node: AgentNode, step: dict[str, Any]) -> list[Any]:
    """What the agents started by the calls of ``step`` show (they render inside it)."""
    state: list[Any] = []
    for call in step.get("tool_calls") or ():
        for host in call.get("host_calls") or ():
            for child in node.by_call.get(str(host.get("id")), ()):
                state.append((child.info.id, child.info.seq, child.info.status))
                for sub in child.steps:
                    state.append(_nested_state(child, sub))
    return state


def run_main(view: RunView, worker: Worker | None, csrf: str) -> Html:
    """The page's ``<main>`` content, built from its fragments."""
    parts = {f.id: f for f in fragments(view, worker, csrf)}
    agents = join(parts[dom_id(root.info.id)].render() for root in view.roots)
    empty = Html("" if view.roots else '<p class="empty">No agent has started in this run yet.</p>')
    return tag(
        '<div id="run">{}{}{}<section class="agents" aria-label="Agents"><div id="agents">{}{}</div></section></div>',
        parts["run-head"].render(),
        parts["approval"].render(),
        parts["timeline"].render(),
        agents,
        empty,
    )


# -- the head, approval and timeline ------------------------------------------------------


def _head(view: RunView) -> Html:
    run = view.run
    took = duration((run.ended_at - run.started_at) * 1000) if run.ended_at else "running"
    facts = [
        ("Skill", esc(run.name)),
        ("Session", tag('<a href="{}">{}</a>', url("/sessions", run.session_id), run.session_id) if run.session_id
         else esc("none")),
        ("Started", when(run.started_at)),
        ("Duration", esc(took)),
        ("Tokens", esc(token_counts({"input_tokens": run.input_tokens, "output_tokens": run.output_tokens}))),
        ("Cost", esc(cost(run.cost_usd) if run.cost_usd else "–")),
        ("Agents", esc(len(view.agents))),
    ]  # fmt: skip
    if run.pid:
        facts.append(("Process", esc(f"{run.pid} on {run.host}")))
    items = join(tag("<div><dt>{}</dt><dd>{}</dd></div>", k, v) for k, v in facts)
    return tag(
        '<div id="run-head"><h1>Run <code>{}</code> <span class="status s-{}">{}</span></h1>'
        '<dl class="facts">{}</dl><p class="run-id">{}</p></div>',
        run.id[:12],
        view.status,
        view.status,
        items,
        run.id,
    )


def _approval(view: RunView, worker: Worker | None, csrf: str) -> Html:
    run, pending, decision = view.run, view.pending, view.decision
    notes: list[Html] = []
    if worker is not None:
        notes.append(_worker_note(worker))
    if pending is None:
        return tag('<div id="approval">{}</div>', join(notes))
    action = url("/runs", run.id, "decide")
    body = [
        tag(
            '<p>Agent <b>{}</b> asks to call <b>{}</b> <span class="muted">({})</span>:</p>'
            '<pre class="json" aria-label="Arguments">{}</pre>',
            pending.get("agent_name"),
            pending.get("skill"),
            pending.get("rule") or pending.get("category") or "ask",
            json_text(pending.get("args")),
        )
    ]
    hidden = tag('<input type="hidden" name="csrf" value="{}">', csrf)
    if decision is not None:
        reason = f" ({decision['reason']})" if decision.get("reason") else ""
        body.append(tag('<p class="decided">Decided: <b>{}</b>{}.</p>', decision.get("action"), reason))
        if worker is None or not worker.running:
            body.append(
                tag(
                    '<form method="post" action="{}">{}<button type="submit">Resume</button></form>',
                    url("/runs", run.id, "resume"),
                    hidden,
                )
            )
    else:
        body.append(
            tag(
                '<div class="decide"><form method="post" action="{}">{}'
                '<button type="submit" name="action" value="approve" class="approve">Approve</button> '
                '<button type="submit" name="action" value="skip">Skip</button></form>'
                '<form method="post" action="{}" class="deny">{}<input type="hidden" name="action" value="deny">'
                '<label>Reason <input name="reason" required maxlength="2000" '
                'placeholder="what the agent should do instead"></label> '
                '<button type="submit" class="deny">Deny</button></form></div>',
                action,
                hidden,
                action,
                hidden,
            )
        )
    return tag(
        '<div id="approval"><section class="approval" aria-labelledby="approval-title">'
        '<h2 id="approval-title">Waiting for approval</h2>{}{}</section></div>',
        join(body),
        join(notes),
    )


def _worker_note(worker: Worker) -> Html:
    if worker.running:
        return tag('<p class="worker" role="status">Resuming in a worker process ({})…</p>', worker.pid)
    if worker.returncode == 0:
        return tag('<p class="worker" role="status">Resumed by the console; the worker finished.</p>')
    what = "is waiting for approval again" if worker.returncode == 3 else f"exited with status {worker.returncode}"
    return tag(
        '<div class="worker" role="status"><p>The worker that resumed it {}.</p><pre>{}</pre></div>',
        what,
        worker.output,
    )


def _timeline(view: RunView) -> Html:
    nodes = view.walk()
    if not nodes:
        return Html('<div id="timeline"></div>')
    start = min(n.info.started_at for n in nodes)
    now = time.time()
    end = max(max((n.info.ended_at or now) for n in nodes), start + 0.001)
    span = end - start

    def x(at: float) -> float:
        return round((at - start) / span * 1000, 2)

    def width(seconds: float) -> float:
        return round(max(seconds / span * 1000, 1.5), 2)

    def bar(kind: str, at: float, seconds: float, title: str) -> Html:
        return tag('<rect class="{}" x="{}" y="1" width="{}" height="10"><title>{}</title></rect>', kind, x(at),
                   width(seconds), title)  # fmt: skip

    rows = []
    for node in nodes:
        info = node.info
        ends = info.ended_at or now
        bars = [tag('<rect class="tl-agent s-{}" x="{}" y="3" width="{}" height="6"></rect>', info.status,
                    x(info.started_at), width(ends - info.started_at))]  # fmt: skip
        for step in node.steps:
            began, turn = step.get("started_at"), step.get("turn")
            if not isinstance(began, (int, float)):
                continue
            model = float(step.get("model_latency_ms") or 0) / 1000
            bars.append(bar("tl-model", began, model, f"turn {turn} model {duration(model * 1000)}"))
            for call in step.get("tool_calls") or ():
                at, took = call.get("started_at"), call.get("latency_ms")
                if isinstance(at, (int, float)):
                    seconds = float(took) / 1000 if took is not None else now - at
                    title = f"turn {turn} {call.get('tool')} {duration(seconds * 1000)}"
                    bars.append(bar("tl-tool", at, seconds, title))
        label = f"{info.name}: {duration((info.started_at - start) * 1000)} to {duration((ends - start) * 1000)}"
        rows.append(
            tag(
                '<div class="tl-row depth-{}"><a class="tl-name" href="#{}">{}</a>'
                '<svg class="tl-bars" viewBox="0 0 1000 12" preserveAspectRatio="none" role="img" aria-label="{}">'
                "{}</svg></div>",
                min(info.depth, 6),
                dom_id(info.id),
                info.name,
                label,
                join(bars),
            )
        )
    return tag(
        '<div id="timeline"><section class="timeline" aria-labelledby="timeline-title"><h2 id="timeline-title">'
        'Timeline</h2><div class="tl">{}</div><div class="tl-axis"><span>0</span><span>{}</span></div>'
        '<p class="legend"><span class="k-model">model</span> <span class="k-tool">code and calls</span></p>'
        "</section></div>",
        join(rows),
        duration(span * 1000),
    )


# -- agents ---------------------------------------------------------------------------------


def _agent(node: AgentNode, *, top: bool) -> Html:
    """An agent's whole section; at the top level its parts carry their fragment ids."""
    ident = dom_id(node.info.id)
    turns = join(_turn(node, step) for step in node.steps)
    children = join(_agent(child, top=top) for child in node.children)
    shown = {str(h.get("id")) for s in node.steps for c in s.get("tool_calls") or () for h in c.get("host_calls") or ()}
    unlisted = join(_agent(c, top=False) for call, cs in node.by_call.items() if call not in shown for c in cs)
    return tag(
        '<section class="agent depth-{}" id="{}" aria-labelledby="{}-title">{}'
        '<div class="turns" id="{}-turns">{}</div>{}<div class="children" id="{}-children">{}{}</div></section>',
        min(node.info.depth, 6),
        ident,
        ident,
        _agent_head(node),
        ident,
        turns,
        _agent_foot(node),
        ident,
        children,
        unlisted,
    )


def _head_facts(node: AgentNode) -> list[str]:
    report, info = node.report, node.info
    facts = [str(report[k]) for k in ("provider", "model") if report.get(k)]
    steps = report.get("steps") or ()
    if steps:
        facts.append(f"{len(steps)} turn" + ("s" if len(steps) != 1 else ""))
        facts.append(token_counts(report.get("usage") or {}) + " tokens")
    if report.get("cost_usd") is not None:
        facts.append(cost(report["cost_usd"]))
    if node.duration_s is not None:
        facts.append(duration(node.duration_s * 1000))
    elif info.status == "running":
        facts.append(f"running for {duration((time.time() - info.started_at) * 1000)}")
    if report.get("retention") not in (None, "permanent"):
        facts.append(f"retention {report['retention']}: no content kept")
    return facts


def _agent_head(node: AgentNode) -> Html:
    info, report = node.info, node.report
    ident = dom_id(info.id)
    level = "h2" if info.depth == 0 else "h3"
    session = tag(' · session <a href="{}">{}</a>', url("/sessions", info.session_id), info.session_id) \
        if info.session_id else Html("")  # fmt: skip
    user = (
        tag('<div class="user"><span class="role">User</span><div class="text">{}</div></div>', report["user_message"])
        if "user_message" in report
        else Html("")
    )
    return tag(
        '<div class="agent-head" id="{}-head"><{} id="{}-title">Agent {} <span class="status s-{}">{}</span></{}>'
        '<p class="facts"><code>{}</code> · {}{}</p>{}</div>',
        ident,
        Html(level),
        ident,
        info.name,
        info.status,
        info.status,
        Html(level),
        info.id,
        " · ".join(_head_facts(node)),
        session,
        user,
    )


def _agent_foot(node: AgentNode) -> Html:
    report = node.report
    ident = dom_id(node.info.id)
    parts: list[Html] = []
    if report.get("compaction"):
        parts.append(tag('<p class="muted">Compaction: {}</p>', json.dumps(report["compaction"])))
    if report.get("message"):  # why it stopped before its end (a stop's reason, a limit)
        parts.append(tag('<p class="stop-message">{}</p>', report["message"]))
    error = report.get("error")
    if error:
        parts.append(
            tag(
                '<div class="error" role="alert"><b>{}</b> {}{}</div>',
                error.get("type"),
                error.get("message") or "",
                _cut(error, "message"),
            )
        )
    elif "result" in report:
        text = json_text(report["result"])
        parts.append(tag('<div class="result"><span class="role">Result</span><pre>{}</pre>{}</div>', text,
                         _cut(report, "result")))  # fmt: skip
    return tag('<div class="agent-foot" id="{}-foot">{}</div>', ident, join(parts))


def _cut(entry: dict[str, Any], field: str) -> Html:
    size = entry.get(field + "_cut")
    return tag(' <span class="cut">cut: {} characters in all</span>', f"{size:,}") if size else Html("")


def _turn(node: AgentNode, step: dict[str, Any]) -> Html:
    ident = dom_id(node.info.id)
    index = step.get("index", 0)
    usage = step.get("usage") or {}
    if step.get("live"):
        facts = ["in progress"]
        if not step.get("tool_calls") and not step.get("text"):
            facts.append("waiting for the model")
    else:
        facts = [f"model {duration(step.get('model_latency_ms'))}"]
        if step.get("tool_calls"):
            facts.append(f"code and calls {duration(step.get('tool_ms'))}")
        facts.append(token_counts(usage) + " tokens")
        if step.get("cost_usd") is not None:
            facts.append(cost(step["cost_usd"]))
        facts.append(str(step.get("finish_reason")))
    if step.get("replayed"):
        facts.append("replayed from the journal")
    parts = [
        tag(
            '<header><h4>Turn {}</h4><span class="facts">{}</span></header>',
            step.get("turn"),
            " · ".join(facts),
        )
    ]
    if step.get("reasoning"):
        parts.append(
            tag(
                '<details class="reasoning" id="{}-r{}"><summary>Reasoning</summary><div class="text">{}{}</div>'
                "</details>",
                ident,
                index,
                step["reasoning"],
                _cut(step, "reasoning"),
            )
        )
    if step.get("text"):
        parts.append(tag('<div class="say"><div class="text">{}</div>{}</div>', step["text"], _cut(step, "text")))
    for number, call in enumerate(step.get("tool_calls") or ()):
        parts.append(_tool_call(node, call, f"{ident}-t{index}-c{number}"))
    live = " live" if step.get("live") else ""
    return tag(
        '<article class="turn{}" id="{}-t{}" aria-label="Turn {}">{}</article>',
        live,
        ident,
        index,
        step.get("turn"),
        join(parts),
    )


def _tool_call(node: AgentNode, call: dict[str, Any], ident: str) -> Html:
    args = call.get("args") or {}
    code = args.get("code")
    state = "running" if call.get("latency_ms") is None else ("error" if call.get("error") else "ok")
    parts = [
        tag(
            '<div class="call-head"><span class="tool">{}</span> · <span class="lat">{}</span>{}</div>',
            call.get("tool"),
            duration(call.get("latency_ms")) if state != "running" else "running",
            Html(' <span class="status s-error">error</span>') if state == "error" else Html(""),
        )
    ]
    if isinstance(code, str):
        parts.append(tag('<pre class="code" aria-label="Code"><code>{}</code></pre>{}', highlight(code),
                         _cut(args, "code")))  # fmt: skip
    elif args:
        parts.append(tag('<pre class="json">{}</pre>', json_text(args)))
    hosts = [_host_call(node, host) for host in call.get("host_calls") or ()]
    if call.get("host_calls_cut"):
        hosts.append(tag('<li class="muted">{} more calls, not recorded</li>', call["host_calls_cut"]))
    if hosts:
        parts.append(tag('<ol class="hosts" aria-label="Calls">{}</ol>', join(hosts)))
    if "result" in call:
        label = "Error the model read" if call.get("error") else "Result the model read"
        parts.append(tag('<details class="result" id="{}-res" open><summary>{}</summary><pre>{}</pre>{}</details>',
                         ident, label, call["result"], _cut(call, "result")))  # fmt: skip
    elif state != "running":
        parts.append(tag('<p class="muted">Result: {} bytes</p>', call.get("result_size", 0)))
    return tag('<section class="call c-{}" aria-label="{} call">{}</section>', state, call.get("tool"), join(parts))


def _host_call(node: AgentNode, host: dict[str, Any]) -> Html:
    status = str(host.get("status") or "")
    parts = [
        tag(
            '<div class="host-head"><span class="arrow">→</span> <span class="skill">{}</span> · '
            '<span class="lat">{}</span> <span class="status s-{}">{}</span></div>',
            host.get("skill"),
            duration(host.get("latency_ms")) if status != "running" else "running",
            status,
            status,
        )
    ]
    if "args" in host:
        parts.append(tag('<pre class="json args" aria-label="Arguments">{}</pre>{}', json_text(host["args"]),
                         _cut(host, "args")))  # fmt: skip
    if status == "ok" and "result" in host:
        parts.append(tag('<pre class="json res" aria-label="Result">{}</pre>{}', json_text(host["result"]),
                         _cut(host, "result")))  # fmt: skip
    error = host.get("error")
    if error:
        parts.append(tag('<div class="error">{}{}</div>', error.get("type"),
                         f": {error['message']}" if error.get("message") else ""))  # fmt: skip
    nested = join(_agent(child, top=False) for child in node.by_call.get(str(host.get("id")), ()))
    return tag('<li class="host h-{}">{}{}</li>', status, join(parts), nested)
