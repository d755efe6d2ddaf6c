"""The map of docs/architecture.md, held against the code: which floor each room of
agent_apps/ stands on, that no import runs up a floor, and how big a room may grow.

Imports inside functions count (a lazy import that reaches up is still a dependency
upwards); imports under ``if TYPE_CHECKING:`` do not (a type may name the class that
owns it). A new room needs a floor here and in the page.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agent_apps"

#: The floor of each room (a module of agent_apps/, or a subpackage as a whole), from
#: the ground up. A room imports rooms on its own floor or below, never above.
FLOORS = {
    # the ground: no imports of our own, or only of each other
    "agent_apps": 0, "_lazy": 0, "_random": 0, "errors": 0, "_json": 0, "_syntax": 0, "_markdown": 0, "_schema": 0,
    "_simple_schema": 0, "_yaml_depth": 0, "host_files": 0, "terminal": 0, "tracing": 0, "progress": 0,
    "machine": 0,
    # when a schedule is due (the store computes next due times with it)
    "timing": 1,
    # what a skill is, where an invocation sits in its run, the parse cache, attachments, a config key's line
    "skill": 1, "run_record": 1, "parse_cache": 1, "attachments": 1, "config_lines": 1,
    # the kernel's rules: the config cascade, allowed-tools, validation, the Context
    "config": 2, "allowed_tools": 2, "validation": 2, "context": 2,
    "budget": 3, "agentskills": 3, "authority": 3, "middleware": 3,
    # the event bus delivers a subscribed ref under its maker's authority
    "pipeline": 4, "admission": 4, "ref_args": 4, "frontmatter": 4, "events": 4,
    # reading skill files; the sandbox and the state store stand beside them
    "loading": 5, "sandbox": 5, "state": 5, "stubs": 5,
    "searchpath": 6, "plugins": 6,
    # the front door, and a run's events read as they happen
    "manager": 7, "run_stream": 7,
    # features built on the kernel
    "tools": 8,
    "agent": 9, "scheduling": 9, "mcp": 9,
    "testing": 10, "batch": 10,
    "cli": 11, "console": 11, "__main__": 12,
}

#: Imports that run up a floor today, each with why it stays for now (docs/architecture.md counts them).
KNOWN_UPWARDS = {
    ("manager", "agent.durable"): "cm.resume() and cm.decide() hand off to durable runs",
    ("manager", "batch"): "cm.batch() hands off to the batch runner",
}

#: Import circles of more than one module today (none may grow, no new one may form).
KNOWN_CIRCLES = [
    {"sandbox._build", "sandbox._engine"},
    {"state.sessions", "state.snapshot"},
    {"batch", "batch.ray", "manager"},
]

MAX_LINES = 700
#: The room that holds the agent run's loop: read top to bottom, it stays short.
RUN_LOOP, RUN_LOOP_LINES = "agent/run.py", 450


def _modules() -> dict[str, Path]:
    files = [p for p in PACKAGE.rglob("*.py") if "guest" not in p.parts]
    out = {}
    for path in files:
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts) or "agent_apps"] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every module's imports of our own modules (by their names in ``modules``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = "" if name == "agent_apps" else name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()

        def add(target: str, name: str = name, found: set[str] = found) -> None:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)

        def walk(nodes: list[ast.stmt], package: str = package, add=add) -> None:
            for node in nodes:
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    walk(node.orelse)
                    continue
                if isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        up = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)] if package else []
                        base = ".".join([*up, base] if base else up)
                    elif base == "agent_apps" or base.startswith("agent_apps."):
                        base = base[len("agent_apps.") :] if base != "agent_apps" else ""
                    else:
                        continue
                    for alias in node.names:
                        full = f"{base}.{alias.name}" if base else alias.name
                        add(full if full in modules else (base or "agent_apps"))
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("agent_apps."):
                            add(alias.name[len("agent_apps.") :])
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        walk(inner)

        walk(ast.parse(path.read_text()).body)
        graph[name] = found
    return graph


def _room(module: str) -> str:
    return module.split(".")[0]


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.add(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_every_room_has_a_floor():
    assert {_room(m) for m in _modules()} - set(FLOORS) == set()


def test_no_import_runs_up_a_floor():
    graph = _imports(_modules())
    upwards = {
        (module, target): f"floor {FLOORS[_room(module)]} -> {FLOORS[_room(target)]}"
        for module, targets in graph.items()
        for target in targets
        if _room(module) != _room(target) and FLOORS[_room(target)] > FLOORS[_room(module)]
    }
    assert set(upwards) - set(KNOWN_UPWARDS) == set(), upwards
    # one that is gone leaves KNOWN_UPWARDS (and the count in docs/architecture.md)
    assert set(KNOWN_UPWARDS) - set(upwards) == set()


def test_no_new_import_circle():
    circles = _circles(_imports(_modules()))
    assert [c for c in circles if c not in KNOWN_CIRCLES] == []
    assert [c for c in KNOWN_CIRCLES if c not in circles] == []  # one that opened leaves the list


def test_rooms_stay_small_and_the_run_loop_short():
    sizes = {path: len(path.read_text().splitlines()) for path in _modules().values()}
    assert {str(p): n for p, n in sizes.items() if n > MAX_LINES} == {}
    assert sizes[PACKAGE / RUN_LOOP] <= RUN_LOOP_LINES
