"""Mutation testing of the security-critical modules: does the suite notice a small bug?

    python benchmarks/mutate.py                  # every target (an hour or more)
    python benchmarks/mutate.py budget paths     # some targets
    python benchmarks/mutate.py budget --list    # the mutants, without running anything
    python benchmarks/mutate.py budget --only '_check'   # the mutants whose id holds a text

For each target (a module, or the statements of some modules that match a pattern) it
makes every mutant (one small change of the source: a comparison, a boolean operator, a
constant, an operand of ``and``/``or`` dropped, a guard negated, a statement removed, an
entry dropped from a literal set), writes it over the module in place, runs the tests
that reach the changed lines with ``pytest -x -q``, and puts the module back. A mutant
the tests fail on is killed; one they pass on survived. A survivor is run again against
the target's whole test pool (some tests reach the code only in a subprocess), and a
survivor listed in :data:`EQUIVALENT` is reported as equivalent, with the reason.

Which tests reach which lines comes from one traced run of the pool per target (a
pytest plugin with ``sys.settrace``; cached under ``$TMPDIR/agent-apps-mutate`` until a
target or test file changes).

The script edits the checkout it runs in, so run it in a worktree of its own and do not
run the test suite there at the same time. Each mutant gets its own file time, so no
``.pyc`` of one is ever taken for another (or for the original); the original text and
time are put back after each mutant, on Ctrl-C, and at the next start if a run was
killed (``*.mutate-orig``). Not in CI: it is slow (docs/testing.md).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    """What to mutate and which tests may notice."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    #: Qualified names of the functions (or classes) to mutate; empty: the whole file.
    scope: tuple[str, ...] = ()
    #: Qualified names left out: message formatting, nothing a test should pin.
    skip: tuple[str, ...] = ()
    #: Mutate only statements whose source matches this (code that moves between files).
    pattern: str | None = None


TARGETS: dict[str, Target] = {
    "allowed_tools": Target(
        ("agent_apps/allowed_tools.py",),
        ("tests/test_allowed_tools.py", "tests/test_redteam_host.py", "tests/test_authority.py"),
        skip=("_short",),
    ),
    "paths": Target(
        ("agent_apps/tools/paths.py",),
        ("tests/tools/test_files.py", "tests/tools/test_own_folder.py", "tests/tools/test_tools_redteam.py"),
    ),
    "authority": Target(
        ("agent_apps/authority.py",),
        (
            "tests/test_authority.py", "tests/scheduling/test_authority.py", "tests/sandbox/test_ref_taking_skills.py",
            "tests/state/test_run_import.py", "tests/agent/test_agent.py", "tests/agent/test_redteam.py",
        ),
    ),
    # The agent's side of the untrusted-call checks, wherever agent/run.py's code lives.
    "agent_untrusted": Target(
        ("agent_apps/agent/*.py",),
        (
            "tests/test_authority.py", "tests/agent/test_agent.py", "tests/agent/test_redteam.py",
            "tests/agent/test_guardrails.py", "tests/agent/test_guidance.py", "tests/agent/test_sessions.py",
        ),
        pattern=r"untrusted",
    ),
    "mcp_server_auth": Target(
        ("agent_apps/mcp/transports.py", "agent_apps/mcp/schemas.py", "agent_apps/mcp/server.py"),
        (
            "tests/mcp/test_http_guards.py", "tests/mcp/test_mcp_transports.py", "tests/mcp/test_mcp_refs.py",
            "tests/mcp/test_mcp_server.py",
        ),
        scope=("BearerGuard", "serving_http", "expose_refs", "tool_name_for_ref", "SkillServer._lookup"),
    ),
    "budget": Target(
        ("agent_apps/budget.py",),
        ("tests/test_budget.py", "tests/agent/test_supervision.py", "tests/agent/test_redteam.py"),
    ),
    "config_precedence": Target(
        ("agent_apps/config.py",),
        ("tests/test_config_precedence.py", "tests/test_config.py", "tests/agent/test_call_config.py"),
        scope=(
            "call_config", "_deep_merge", "Cascade.base_layers", "Cascade.layers", "Cascade.resolve",
            "Cascade.project_file", "Cascade._directory_files", "_by_mtime", "_merge", "_record", "_drop_sources",
            "_join_sources",
        ),
    ),
    "journal": Target(
        ("agent_apps/agent/durable.py", "agent_apps/state/journal.py"),
        (
            "tests/agent/test_durable_replay.py", "tests/agent/test_durable.py", "tests/agent/test_retention.py",
            "tests/state/test_store.py",
        ),
        skip=("_short", "_short_args"),
    ),
    "retention": Target(
        ("agent_apps/agent/recorder.py",),
        ("tests/agent/test_retention.py", "tests/agent/test_sessions.py", "tests/agent/test_durable.py"),
        scope=("Recorder.__init__", "Recorder.finish"),
    ),
    "subprocess_env": Target(
        ("agent_apps/tools/subprocess.py",),
        ("tests/tools/test_shell.py", "tests/tools/test_cli_tools.py"),
        scope=("ALLOWED_ENV", "build_env"),
    ),
    "json_depth": Target(
        ("agent_apps/_json.py",),
        ("tests/test_json.py", "tests/sandbox/test_depth_limits.py", "tests/sandbox/test_redteam.py"),
    ),
}

_TYPED = "the cascade's key table refuses this first (ConfigError): only a number reaches it, never true/false"
_MAPPING = "the cascade's key table types this key as a mapping and refuses anything else first (ConfigError)"
_FOUND = "never runs: _error is only called with keys some layer set, and the cascade records each one's layer"

#: Survivors judged equivalent (no test can tell them from the original), by mutant id,
#: with the reason. An id names the file, the function and the change, not a line.
EQUIVALENT: dict[str, str] = {
    """agent_apps/tools/paths.py:_entry: ("/", "~", "*") -> without '/'""":
        "os.path.join(workspace, p) is p itself for an absolute p: joining changes nothing",
    """agent_apps/tools/paths.py:_entry: ("/", "~", "*") -> without '~'""":
        "expanduser makes a ~ path absolute, and joining the workspace to an absolute path changes nothing",
    """agent_apps/mcp/transports.py:BearerGuard.__call__: scope.get("headers") or () -> scope.get('headers')""":
        "an ASGI HTTP scope always carries headers (the ASGI spec requires the key; uvicorn always sets it)",
    "agent_apps/mcp/transports.py:expose_refs: 32 -> 31":
        "31 random bytes are as unguessable as 32; no behaviour reads the length",
    "agent_apps/mcp/transports.py:expose_refs: 32 -> 33":
        "33 random bytes are as unguessable as 32; no behaviour reads the length",
    """agent_apps/_json.py:loads: isinstance(text, str) and not text.startswith("\\ufeff") -> isinstance(text, str)""":
        "text starting with a BOM is refused either way (a JSONDecodeError, a ValueError); only the message differs",
    "agent_apps/_json.py:loads: 1 -> 2":
        "for bytes, any count above max_depth makes the depth walk run; max_depth + 2 is one",
    "agent_apps/budget.py:Ledger.deadline: min(ends) -> max(ends)":
        "a sub-agent's deadline is bounded twice more: its run record takes the earlier of its caller's and its "
        "own (RunRecord.child), and the caller's own timer cancels the whole tree at the caller's deadline",
    "agent_apps/budget.py:SpawnLimits: 2048 -> 2047":
        "never used: supervision_config builds SpawnLimits with every key, from DEFAULTS['model']['spawn'] up",
    "agent_apps/budget.py:SpawnLimits: 2048 -> 2049":
        "never used: supervision_config builds SpawnLimits with every key, from DEFAULTS['model']['spawn'] up",
    """agent_apps/budget.py:supervision_config: resolved.values.get("model") or {} -> resolved.values.get('model')""":
        "DEFAULTS give every cascade a model section, and the key table refuses a null one",
    """agent_apps/budget.py:supervision_config: model.get("spawn") or {} -> model.get('spawn')""":
        "DEFAULTS give every cascade model.spawn, and the key table refuses a null one",
    """agent_apps/budget.py:supervision_config: _mapping(resolved, "model.budget", budget) -> pass""":
        "the cascade's key table types model.budget as a mapping and refuses anything else first (ConfigError)",
    """agent_apps/budget.py:supervision_config: _mapping(resolved, "model.spawn", spawn) -> pass""":
        "the cascade's key table types model.spawn as a mapping and refuses anything else first (ConfigError)",
    "agent_apps/budget.py:supervision_config: 1 -> 2":
        "the 'did you mean' hint reads only the first close match; asking difflib for two changes nothing",
    "agent_apps/budget.py:Ledger.deadline_exceeded: now >= node.started + limit -> now > node.started + limit":
        "time is continuous: the deadline timer asks 1 ms after the deadline, and no clock reads equal twice",
    "agent_apps/budget.py:Ledger.deadline_exceeded: 3 -> 2":
        "the precision of the seconds reported in the error (ms); no behaviour depends on it",
    "agent_apps/budget.py:Ledger.deadline_exceeded: 3 -> 4":
        "the precision of the seconds reported in the error (ms); no behaviour depends on it",
    "agent_apps/budget.py:Ledger.to_json: 6 -> 5":
        "the precision of the dollars shown in the run report; the budget itself counts unrounded",
    "agent_apps/budget.py:Ledger.to_json: 6 -> 7":
        "the precision of the dollars shown in the run report; the budget itself counts unrounded",
    "agent_apps/budget.py:_number: isinstance(value, (int, float)) and not isinstance(value, bool) and m… -> "
    "not isinstance(value, bool) and math.isfinite(value)": _TYPED,
    "agent_apps/budget.py:_number: isinstance(value, (int, float)) and not isinstance(value, bool) and m… -> "
    "isinstance(value, (int, float)) and math.isfinite(value)": _TYPED,
    "agent_apps/budget.py:_number: ok and not real -> not real":
        "whole-number keys reach it only as ints (the key table), and an int is finite: ok holds for them",
    """agent_apps/budget.py:_mapping: raise _error(resolved, key, f"{key} must be a mapping, not {type(valu… -> pass""":
        _MAPPING,
    """agent_apps/budget.py:_price: resolved.values.get("prices") or {} -> resolved.values.get('prices')""":
        "DEFAULTS give every cascade a price table, and the key table refuses a null one",
    """agent_apps/budget.py:_price: _mapping(resolved, "prices", table) -> pass""": _MAPPING,
    "agent_apps/budget.py:_price: _mapping(resolved, key, entry) -> pass": _MAPPING,
    "agent_apps/budget.py:_error: source is None and len(parts) > 1 -> source is None": _FOUND,
    "agent_apps/budget.py:_error: len(parts) > 1 -> len(parts) >= 1": _FOUND,
    "agent_apps/budget.py:_error: 1 -> 0": _FOUND,
    "agent_apps/budget.py:_error: 1 -> 2": _FOUND,
    "agent_apps/budget.py:_error: parts.pop() -> pass": _FOUND,
    """agent_apps/budget.py:_error: ".".join(parts) + "." -> '.'.join(parts) - '.'""": _FOUND,
    "agent_apps/budget.py:_error: source is not None and os.path.isfile(source) -> "
    "source is not None or os.path.isfile(source)":
        "source is never None (see the loop), and a source that is no file fails to open: the except then leaves "
        "the line out, as the isfile check does",
    "agent_apps/budget.py:_error: source is not None and os.path.isfile(source) -> os.path.isfile(source)":
        "source is never None: _error is only called with keys some layer set",
    "agent_apps/budget.py:_error: source is not None and os.path.isfile(source) -> source is not None":
        "a source that is no file (call, defaults, metadata) fails to open, and the except leaves the line out, "
        "as the isfile check does",
    """agent_apps/budget.py:_error: source or "config" -> source""":
        "source is never None: _error is only called with keys some layer set",
    "agent_apps/config.py:Cascade._directory_files: not skill.path or not skill.root -> not skill.root":
        "a skill with a root was loaded from a file under it, so it has a path too",
    "agent_apps/config.py:Cascade._directory_files: directory == root or directory.parent == directory or root "
    "not in dir… -> directory.parent == directory or root not in directory.parents":
        "the last condition ends the walk at the root as well: a folder is not among its own parents",
    "agent_apps/config.py:Cascade._directory_files: directory == root or directory.parent == directory or root "
    "not in dir… -> directory == root or root not in directory.parents":
        "the walk starts at a skill found under its root and stops there, so it never reaches the filesystem's root",
    "agent_apps/config.py:Cascade._directory_files: directory == root or directory.parent == directory or root "
    "not in dir… -> directory == root or directory.parent == directory":
        "a skill's path lies under the root it was found in (the scan joins them), so the walk meets the root",
    "agent_apps/config.py:_merge: key in _CONCATENATED and isinstance(value, list) and isinstance(into.… -> "
    "key in _CONCATENATED and isinstance(into.get(key), list)":
        "the key table refuses a middleware that is not a list of strings before the layers merge",
    """agent_apps/agent/recorder.py:Recorder.__init__: self.session is not None and retention != "none" -> """
    """retention != 'none'""":
        "writes_messages is only read to choose self.session, which is None then anyway",
    "agent_apps/agent/recorder.py:Recorder.__init__: 0 -> 1":
        "system_tokens is read when a turn ends, and set_system always sets it before the first turn",
    "agent_apps/agent/recorder.py:Recorder.finish: await journal.run.flush() -> pass":
        "nothing is queued when a run finishes: code runs, model responses, checkpoints and halts flush the "
        "journal before a turn or the run can end (checked on a cancel mid-turn: no entry queued)",
    "agent_apps/agent/recorder.py:Recorder.finish: ended and session is not None -> ended":
        "with no session, forget_run's statements match no row",
    "agent_apps/agent/durable.py:HostCall: False -> True": "AgentJournal.issue always passes next",
    """agent_apps/agent/durable.py:RunJournal.pending: point is not None and point.decision is not None -> """
    """point is not None""":
        "a resumed run's checkpoint always holds a decision when it holds a pending call: claim refuses it otherwise",
    "agent_apps/agent/durable.py:AgentJournal: False -> True":
        "needs_messages only asks the provider to send the conversation along; the journal never reads it",
    "agent_apps/agent/durable.py:AgentJournal.__init__: 0 -> 1":
        "code_run sets the step before any call of it is issued",
    "agent_apps/agent/durable.py:AgentJournal.__init__: 0 -> 1 #2":
        "code_run sets the issue count before any call of it is issued",
    "agent_apps/agent/durable.py:AgentJournal.__init__: False -> True":
        "model_call sets _answered before each model_response reads it",
    "agent_apps/agent/durable.py:AgentJournal.code_run: 63 -> 62": "the width of the recorded random seed",
    "agent_apps/agent/durable.py:AgentJournal.code_run: 63 -> 64": "the width of the recorded random seed",
    "agent_apps/agent/durable.py:_write_rows: False -> True":
        "ensure_ascii: the stored JSON text escapes non-ASCII, and decodes to the same value",
    "agent_apps/agent/durable.py:_write_rows: False -> True #2":
        "ensure_ascii: the stored JSON text escapes non-ASCII, and decodes to the same value",
    "agent_apps/agent/durable.py:_write_rows: False -> True #3":
        "ensure_ascii: the stored JSON text escapes non-ASCII, and decodes to the same value",
    "agent_apps/state/journal.py:_dump: False -> True":
        "ensure_ascii: the stored JSON text escapes non-ASCII, and decodes to the same value",
    """agent_apps/state/journal.py:Journal.restore: None if checkpoint.get("decision") is None else """
    """_dump(checkpoint["dec… -> None if not checkpoint.get('decision') is None else _dump(checkpoint[…""":
        "an imported checkpoint never holds a decision (run_snapshot refuses one): restore only ever writes none",
    """agent_apps/state/journal.py:Journal.restore: checkpoint.get("decision") is None -> """
    """checkpoint.get('decision') is not None""":
        "an imported checkpoint never holds a decision (run_snapshot refuses one): restore only ever writes none",
    "agent_apps/_json.py:loads: brackets > max_depth -> brackets >= max_depth":
        "the bracket count only spares the walk; walking one more text changes no result",
}


# -- making mutants ------------------------------------------------------------------


@dataclass
class Mutant:
    path: Path
    qualname: str
    line: int
    end_line: int
    start: int  # byte offsets of the replaced source
    end: int
    replacement: str
    before: str
    after: str
    id: str = ""

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]


_SWAPS: dict[type[ast.AST], list[Any]] = {
    ast.Lt: [ast.LtE], ast.LtE: [ast.Lt], ast.Gt: [ast.GtE], ast.GtE: [ast.Gt],
    ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.In: [ast.NotIn], ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot], ast.IsNot: [ast.Is],
    ast.And: [ast.Or], ast.Or: [ast.And],
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult], ast.FloorDiv: [ast.Mult],
}  # fmt: skip
_CALL_SWAPS = {"any": "all", "all": "any", "min": "max", "max": "min"}
_LOGGERS = {"log", "logger", "logging"}


class _Finder(ast.NodeVisitor):
    """Collects ``(node, mutated node or None for "pass", qualname)`` in source order."""

    def __init__(
        self, scope: tuple[str, ...], skip: tuple[str, ...], pattern: re.Pattern[str] | None, source: str
    ) -> None:
        self.scope, self.skip, self.pattern, self.source = scope, skip, pattern, source
        self.stack: list[str] = []
        #: (node, the mutated node or None for ``pass``, qualname, what the change is if
        #: the mutated node's text would not say it well)
        self.found: list[tuple[ast.AST, ast.AST | None, str, str | None]] = []
        self.active = not scope
        #: With a pattern: whether the statement being visited matches it (its header,
        #: for a compound statement).
        self.statement_matches = False

    def visit(self, node: ast.AST) -> None:
        if self.pattern is None or not isinstance(node, ast.stmt):
            return super().visit(node)  # type: ignore[no-any-return]
        outer = self.statement_matches
        if isinstance(node, (ast.If, ast.While)):
            header: list[ast.AST] = [node.test]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            header = [node.target, node.iter]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            header = [item.context_expr for item in node.items]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
            header = []
        else:
            header = [node]
        self.statement_matches = any(self.pattern.search(ast.get_source_segment(self.source, h) or "") for h in header)
        try:
            return super().visit(node)  # type: ignore[no-any-return]
        finally:
            self.statement_matches = outer

    # where we are
    def _named(self, node: ast.AST, name: str) -> None:
        self.stack.append(name)
        outer = self.active
        qual = ".".join(self.stack)
        if self.scope and any(qual == s or qual.startswith(s + ".") for s in self.scope):
            self.active = True
        if qual in self.skip:
            self.active = False
        for child in ast.iter_child_nodes(node):
            if child not in getattr(node, "decorator_list", ()) and child is not getattr(node, "returns", None):
                self.visit(child)
        self.active = outer
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # noqa: N802
        self._named(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # noqa: N815

    def visit_ClassDef(self, node: ast.ClassDef) -> None:  # noqa: N802
        self._named(node, node.name)

    def visit_Assign(self, node: ast.Assign | ast.AnnAssign) -> None:  # noqa: N802
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if "__all__" in names or node.value is None:
            return
        if self.scope and not self.stack and any(n in self.scope for n in names):  # a module constant in scope
            outer, self.active = self.active, True
            self.visit(node.value)
            self.active = outer
            return
        self.visit(node.value)

    visit_AnnAssign = visit_Assign  # type: ignore[assignment]  # noqa: N815

    def visit_arguments(self, node: ast.arguments) -> None:  # noqa: N802
        return  # annotations are not code, and defaults are the signature's

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:  # f-strings: messages  # noqa: N802
        return

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if self._matches(node.test) and not isinstance(node.test, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            self._add(node.test, ast.UnaryOp(ast.Not(), node.test))  # a guard negated
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:  # noqa: N802
        self._delete(node)  # the message is not mutated, the raise is

    def visit_Return(self, node: ast.Return) -> None:  # noqa: N802
        self._statement(node)

    def visit_Expr(self, node: ast.Expr) -> None:  # noqa: N802
        if isinstance(node.value, ast.Constant):
            return  # a docstring
        call = node.value.value if isinstance(node.value, ast.Await) else node.value
        func = call.func if isinstance(call, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _LOGGERS:
            return
        self._delete(node)
        self._statement(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:  # noqa: N802
        self._delete(node)
        self._statement(node)

    def visit_Continue(self, node: ast.Continue) -> None:  # noqa: N802
        self._delete(node)

    visit_Break = visit_Continue  # type: ignore[assignment]  # noqa: N815

    def _statement(self, node: ast.stmt, children: list[ast.AST] | None = None) -> None:
        for child in children if children is not None else ast.iter_child_nodes(node):
            self.visit(child)

    # what is mutated
    def _matches(self, node: ast.AST) -> bool:
        return self.active and (self.pattern is None or self.statement_matches)

    def _add(self, node: ast.AST, mutated: ast.AST | None, says: str | None = None) -> None:
        self.found.append((node, mutated, ".".join(self.stack) or "<module>", says))

    def _delete(self, node: ast.stmt) -> None:
        if self._matches(node):
            self._add(node, None)

    def visit_Compare(self, node: ast.Compare) -> None:  # noqa: N802
        if self._matches(node):
            for i, op in enumerate(node.ops):
                for new in _SWAPS.get(type(op), []):
                    mutated = copy.deepcopy(node)
                    mutated.ops[i] = new()
                    self._add(node, mutated)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:  # noqa: N802
        if self._matches(node):
            for new in _SWAPS[type(node.op)]:
                self._add(node, ast.BoolOp(new(), node.values))
            for i in range(len(node.values)):  # an operand dropped
                rest = node.values[:i] + node.values[i + 1 :]
                self._add(node, rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:  # noqa: N802
        if self._matches(node):
            for new in _SWAPS.get(type(node.op), []):
                self._add(node, ast.BinOp(node.left, new(), node.right))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:  # noqa: N802
        if self._matches(node) and isinstance(node.op, (ast.Not, ast.USub)):
            self._add(node, node.operand)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:  # noqa: N802
        if self._matches(node):
            self._add(node, ast.IfExp(ast.UnaryOp(ast.Not(), node.test), node.body, node.orelse))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        if self._matches(node) and isinstance(node.func, ast.Name) and node.func.id in _CALL_SWAPS:
            self._add(node, ast.Call(ast.Name(_CALL_SWAPS[node.func.id], ast.Load()), node.args, node.keywords))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:  # noqa: N802
        if not self._matches(node):
            return
        value = node.value
        if isinstance(value, bool):
            self._add(node, ast.Constant(not value))
        elif isinstance(value, int):
            for new in sorted({value + 1, value - 1} - {-1} if value else {1}):
                self._add(node, ast.Constant(new))
        elif isinstance(value, float):
            self._add(node, ast.Constant(value + 1))

    def _literal(self, node: ast.Set | ast.List | ast.Tuple) -> None:
        """An entry dropped from a collection of names (a set, or three or more strings:
        not a pair)."""
        items = node.elts
        strings = all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items)
        if self._matches(node) and strings and len(items) >= (2 if isinstance(node, ast.Set) else 3):
            for i, item in enumerate(items):
                rest = items[:i] + items[i + 1 :]
                mutated = ast.Set(rest) if isinstance(node, ast.Set) else type(node)(rest, ast.Load())
                self._add(node, mutated, f"without {item.value!r}")  # type: ignore[attr-defined]
        else:
            self.generic_visit(node)

    visit_Set = visit_List = visit_Tuple = _literal  # type: ignore[assignment]  # noqa: N815


def _offsets(source: bytes) -> list[int]:
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def mutants_of(path: Path, target: Target) -> list[Mutant]:
    source = path.read_bytes()
    text = source.decode()
    tree = ast.parse(text)
    pattern = re.compile(target.pattern) if target.pattern else None
    finder = _Finder(target.scope, target.skip, pattern, text)
    finder.visit(tree)
    starts = _offsets(source)
    rel = path.relative_to(ROOT).as_posix()
    made: list[Mutant] = []
    seen: dict[str, int] = {}
    for node, mutated, qualname, says in finder.found:
        start = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        before = source[start:end].decode()
        if mutated is None:
            replacement, after = "pass", "pass"
        else:
            after = ast.unparse(ast.fix_missing_locations(mutated))
            replacement = f"({after})" if isinstance(node, ast.expr) else after
        if isinstance(node, ast.stmt) and mutated is None:
            before = before.splitlines()[0]
        ident = f"{rel}:{qualname}: {_short(before)} -> {says or _short(after)}"
        seen[ident] = seen.get(ident, 0) + 1
        if seen[ident] > 1:
            ident += f" #{seen[ident]}"
        mutant = Mutant(path, qualname, node.lineno, node.end_lineno, start, end, replacement, before, after, ident)  # type: ignore[attr-defined]
        try:
            compile(mutant.apply(source), str(path), "exec")
        except SyntaxError:
            continue  # not a program: nothing to learn
        made.append(mutant)
    return made


def target_files(target: Target) -> list[Path]:
    return sorted(p for pattern in target.files for p in ROOT.glob(pattern))


# -- which tests reach which lines ------------------------------------------------------------


class _Tracer:
    """A pytest plugin: for each test, the lines of ``files`` it ran, and its duration."""

    def __init__(self, files: list[str]) -> None:
        self.files = set(files)
        self.hits: dict[str, set[tuple[str, int]]] = {}
        self.durations: dict[str, float] = {}
        self.order: list[str] = []
        self.failed: list[str] = []
        self.current: set[tuple[str, int]] | None = None

    def _local(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if self.current is not None and event in ("line", "call"):
            self.current.add((frame.f_code.co_filename, frame.f_lineno))
        return self._local

    def _global(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if frame.f_code.co_filename in self.files:
            return self._local(frame, event, arg)
        return None

    def pytest_sessionstart(self, session) -> None:  # type: ignore[no-untyped-def]
        import threading

        threading.settrace(self._global)
        sys.settrace(self._global)

    def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
        self.order.append(item.nodeid)
        self.current = self.hits.setdefault(item.nodeid, set())
        self._restore_trace()

    def _restore_trace(self) -> None:
        if sys.gettrace() is None:  # a test that set its own trace function (or a debugger) took ours
            sys.settrace(self._global)

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            self.failed.append(report.nodeid)


def coverage_map(name: str, target: Target, files: list[Path]) -> dict[str, object]:
    """``{"order": [nodeid], "durations": {nodeid: s}, "lines": {file:line: [index]}}``, cached."""
    digest = hashlib.sha256()
    for path in [*files, *(ROOT / t for t in target.tests)]:
        digest.update(path.read_bytes())
    cache = Path(tempfile.gettempdir()) / "agent-apps-mutate" / f"{name}-{digest.hexdigest()[:16]}.json"
    if cache.exists():
        return json.loads(cache.read_text())  # type: ignore[no-any-return]
    print(f"[{name}] tracing which tests reach which lines (once per change)...", flush=True)
    out = Path(tempfile.mkdtemp()) / "map.json"
    script = (
        "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport pytest, mutate\n"
        "tracer = mutate._Tracer(json.loads(sys.argv[2]))\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', *json.loads(sys.argv[3])], plugins=[tracer])\n"
        "json.dump({'order': tracer.order, 'durations': tracer.durations, 'failed': tracer.failed,\n"
        "           'hits': {k: sorted(v) for k, v in tracer.hits.items()}}, open(sys.argv[4], 'w'))\n"
    )
    args = [str(Path(__file__).parent), json.dumps([str(f) for f in files]), json.dumps(list(target.tests)), str(out)]
    subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, check=False, env=_env())
    raw = json.loads(out.read_text())
    if raw["failed"]:  # a test with a time limit of its own may not make it while traced
        print(f"[{name}] failed while traced, so never picked for a mutant (the whole pool still runs them): "
              + ", ".join(raw["failed"]))
    index = {nodeid: i for i, nodeid in enumerate(raw["order"])}
    lines: dict[str, list[int]] = {}
    for nodeid, hits in raw["hits"].items():
        if nodeid in raw["failed"]:
            continue
        for filename, line in hits:
            lines.setdefault(f"{filename}:{line}", []).append(index[nodeid])
    data = {"order": raw["order"], "durations": raw["durations"], "lines": lines}
    cache.parent.mkdir(exist_ok=True)
    cache.write_text(json.dumps(data))
    return data


# -- running them ----------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


@contextlib.contextmanager
def written(mutant: Mutant, serial: int) -> Iterator[None]:
    """The mutant in place of the module while the block runs; the original after."""
    path = mutant.path
    original = path.read_bytes()
    stat = path.stat()
    backup = path.with_name(path.name + ".mutate-orig")
    backup.write_bytes(original)
    os.utime(backup, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    try:
        path.write_bytes(mutant.apply(original))
        when = stat.st_mtime_ns - (serial + 1) * 1_000_000_000  # a time of its own: no stale .pyc
        os.utime(path, ns=(when, when))
        yield
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        backup.unlink()


def restore_leftovers() -> None:
    """Put back originals a killed run left mutated."""
    for backup in ROOT.glob("agent_apps/**/*.mutate-orig"):
        path = backup.with_name(backup.name.removesuffix(".mutate-orig"))
        stat = backup.stat()
        path.write_bytes(backup.read_bytes())
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        backup.unlink()
        print(f"restored {path.relative_to(ROOT)} from an interrupted run")


def run_tests(nodeids: list[str], timeout: float) -> str:
    """'killed', 'survived' or 'timeout'."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *nodeids]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout"
    if code in (4, 5):
        raise RuntimeError(f"pytest could not run {nodeids[:3]}...: exit {code}")
    return "survived" if code == 0 else "killed"


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, timeout, survived, equivalent, unreached
    tests: int = 0
    note: str = ""


@dataclass
class Score:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, *statuses: str) -> int:
        return sum(o.status in statuses for o in self.outcomes)

    @property
    def score(self) -> float:
        judged = len(self.outcomes) - self.count("equivalent")
        return 100.0 * self.count("killed", "timeout") / judged if judged else 100.0


def mutate(name: str, target: Target, only: str | None, confirm: bool) -> Score:
    files = target_files(target)
    mutants = [m for path in files for m in mutants_of(path, target) if only is None or only in m.id]
    score = Score(name)
    ids = {m.id for m in mutants}
    prefixes = tuple(f"{path.relative_to(ROOT).as_posix()}:" for path in files)
    for stale in (k for k in EQUIVALENT if k.startswith(prefixes) and k not in ids and only is None):
        print(f"[{name}] EQUIVALENT names a mutant that no longer exists: {stale}")
    if not mutants:
        return score
    data = coverage_map(name, target, files)
    order: list[str] = data["order"]  # type: ignore[assignment]
    durations: dict[str, float] = data["durations"]  # type: ignore[assignment]
    lines: dict[str, list[int]] = data["lines"]  # type: ignore[assignment]
    pool = sum(durations.values())
    started = time.monotonic()
    for serial, mutant in enumerate(mutants):
        reached = sorted({i for line in range(mutant.line, mutant.end_line + 1)
                          for i in lines.get(f"{mutant.path}:{line}", ())})
        nodeids = [order[i] for i in reached]
        with written(mutant, serial):
            if nodeids:
                status = run_tests(nodeids, 3 * sum(durations[n] for n in nodeids) + 60)
            else:
                status = "unreached"
            if status in ("survived", "unreached") and confirm:
                whole = run_tests(list(target.tests), 3 * pool + 120)
                if whole != "survived":
                    status, nodeids = whole, list(target.tests)
        if status in ("survived", "unreached") and mutant.id in EQUIVALENT:
            outcome = Outcome(mutant, "equivalent", len(nodeids), EQUIVALENT[mutant.id])
        else:
            outcome = Outcome(mutant, status, len(nodeids))
        score.outcomes.append(outcome)
        mark = {"killed": ".", "timeout": "T", "equivalent": "e"}.get(outcome.status, "S")
        print(mark, end="" if mark in ".Te" else f" {mutant.id} (line {mutant.line})\n", flush=True)
    score.seconds = time.monotonic() - started
    print()
    report([score], survivors=False)
    return score


def report(scores: list[Score], *, survivors: bool = True) -> None:
    print(f"\n{'target':<20} {'mutants':>7} {'killed':>7} {'equiv':>6} {'survived':>8} {'score':>7} {'time':>7}")
    for s in scores:
        alive = s.count("survived", "unreached")
        killed = s.count("killed", "timeout")
        print(f"{s.name:<20} {len(s.outcomes):>7} {killed:>7} {s.count('equivalent'):>6} {alive:>8} "
              f"{s.score:>6.1f}% {s.seconds:>6.0f}s")
    for s in scores if survivors else ():
        for o in s.outcomes:
            if o.status in ("survived", "unreached", "equivalent"):
                what = {"survived": "SURVIVED", "unreached": "NO TEST REACHES IT", "equivalent": "equivalent"}
                print(f"\n{what[o.status]}: {o.mutant.id}\n  {o.mutant.path.relative_to(ROOT)}:{o.mutant.line}"
                      + (f"\n  why: {o.note}" if o.note else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help=f"some of: {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--only", help="only the mutants whose id contains this text")
    parser.add_argument("--no-confirm", action="store_true", help="do not run survivors against the whole pool")
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    names = args.targets or list(TARGETS)
    if args.list:
        for name in names:
            target = TARGETS[name]
            for mutant in (m for p in target_files(target) for m in mutants_of(p, target)):
                if args.only is None or args.only in mutant.id:
                    print(f"{name}\t{mutant.line}\t{mutant.id}")
        return 0
    restore_leftovers()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through written(): the original is back
    scores = [mutate(name, TARGETS[name], args.only, not args.no_confirm) for name in names]
    report(scores)
    return 0 if all(s.count("survived", "unreached") == 0 for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
