"""The code executor: runs the model's code in the run's sandbox.

The provider calls the ``invoke`` callback (:meth:`CodeExecutor.invoke`) with the code
of one tool call. The executor counts it as a step (``model.max_steps``), runs it as
the anonymous, untrusted skill ``agent-code`` through the pipeline, and hands the
provider the text the model sees: output, value, error, and whether ``finish()``
accepted the value (checked against ``returns``).

One sandbox serves the whole run. It comes from a process-wide pool of
pre-instantiated sandboxes, is seeded with the run's memory, and is limited by the
agent's limits. Its ``memory_mb`` counts against ``model.spawn.max_memory_mb`` until
the run releases it. The tool calls of one model answer (parallel tool calls) run as
one sandbox run, each piece a task on the guest's event loop (docs/supervision.md).
Host calls from the code go through the gateway (:mod:`.gateway`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..sandbox import RunResult
from ..skill import Skill
from ..validation import schema_problem
from .limits import JOIN_GRACE
from .prompt import INVOKE_TOOL, cap

if TYPE_CHECKING:
    from ..context import Context
    from ..manager import ContextManager
    from ..sandbox import Sandbox, SandboxLimits, SandboxPool
    from .run import AgentRun

__all__ = ["CodeExecutor", "code_skill"]

#: Event loop ticks without a new call after which the parallel calls of a turn run.
SETTLE_TICKS = 3

#: The ``agent-code`` skills a manager keeps before it drops them all and starts again:
#: agent code may start sub-agents with allowed-tools of its own, each a new one. A
#: clear is one step, safe beside another thread's run (``invoke_sync`` from threads).
CODE_SKILLS = 256

#: Where an ``agent-code`` invocation holds the executor of its run (``ctx.internals``).
_EXECUTOR = "agent_apps.agent.executor"


def code_skill(cm: ContextManager, agent: str, allowed_tools: str | None) -> Skill:
    """The anonymous, untrusted skill the model's code runs as, for agent ``agent``
    allowed ``allowed_tools``. It is made once per manager and kept until it reloads,
    as a named skill is: its schema is compiled once, and its middleware list, security
    config and allowed-tools matches are cached on it, not made again for each run."""
    skills = cm._code_skills
    skill = skills.get((agent, allowed_tools))
    if skill is None:
        if len(skills) >= CODE_SKILLS:
            skills.clear()
        skill = skills[(agent, allowed_tools)] = Skill(
            name="agent-code",
            description=f"code written by agent {agent}",
            params={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            allowed_tools=allowed_tools,
            kind="anonymous",
            _main=_run_code,
        )
    return skill


async def _run_code(code_ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
    """The ``main`` of ``agent-code``: the code runs in its run's executor."""
    executor: CodeExecutor = code_ctx.internals[_EXECUTOR]
    return await executor._run_code(code_ctx, args)


_POOL: SandboxPool | None = None


class CodeExecutor:
    """The sandbox of one agent run and the code runs in it (see the module docstring)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self.sandbox: Sandbox | None = None
        #: The invocation of the code running now (``agent-code``): host calls are its children.
        self.code_ctx: Context | None = None
        self._release_memory: Callable[[], None] | None = None
        self._batch: list[tuple[str, asyncio.Future[Any]]] = []  # parallel calls forming one sandbox run
        self._flusher: asyncio.Future[Any] | None = None  # the batch being run
        self.skill = code_skill(run.cm, run.settings.name, run.settings.allowed_tools)

    def allow(self, allowed_tools: str | None) -> None:
        """Let the run's code call ``allowed_tools`` (before its first code run)."""
        self.skill = code_skill(self.run.cm, self.run.settings.name, allowed_tools)

    # -- the sandbox -----------------------------------------------------------------

    async def acquire(self, memory: dict[str, Any]) -> None:
        """A sandbox from the process-wide pool, seeded with ``memory``; its
        ``memory_mb`` is reserved in the run tree until :meth:`release_memory`."""
        global _POOL
        from ..sandbox import SandboxPool

        run = self.run
        record, serving = run.record, run.settings.serving
        limits: SandboxLimits = record.limits.sandbox  # type: ignore[union-attr]
        self._release_memory = record.tree.reserve_memory(run.settings.name, limits.memory_mb, record.spawn)  # type: ignore[arg-type]
        try:
            if _POOL is None:
                _POOL = SandboxPool(size=2)
            served = {"skill": serving.skill.name, "args": serving.args} if serving is not None else None
            self.sandbox = await _POOL.acquire(memory=memory, limits=limits, call_host=run.gateway.call, target=served)
        except BaseException:
            self.release_memory()
            raise

    def interrupt(self) -> None:
        """Stop the code running now, if any."""
        if self.sandbox is not None:
            self.sandbox.interrupt()

    async def close(self) -> None:
        """The run is over: stop a batch still forming and close the sandbox."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            await asyncio.wait([self._flusher], timeout=JOIN_GRACE)
        await self.sandbox.close()  # type: ignore[union-attr]

    def release_memory(self) -> None:
        """Give the sandbox's ``memory_mb`` back to the run tree (idempotent)."""
        if self._release_memory is not None:
            self._release_memory()

    # -- the invoke callback ---------------------------------------------------------

    async def invoke(self, ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        """Run the model's code as an anonymous, untrusted skill through the pipeline."""
        tracing.gen_ai(ctx.span, "execute_tool", tool=INVOKE_TOOL["name"])
        run = self.run
        state, settings = run.state, run.settings
        if state.halted is not None:
            raise state.halted
        await run.reporter.flow()  # a reader of the run's events that is behind holds it here
        if state.finished:
            return self._refused("The task is already finished; no more code runs.")
        stopping = run.stopper.reason
        if stopping is not None:
            return self._refused(f"The run was stopped ({stopping}); this code did not run.")
        state.steps += 1
        if state.steps > settings.max_steps:
            state.exhausted = True
            return {
                "text": f"Step limit reached ({settings.max_steps} invoke calls): no more code will run; "
                "the run stops at the end of this turn.",
                "error": True,
            }
        internals = {"untrusted": True, _EXECUTOR: self}
        data = await ctx.manager.invoke(self.skill, {"code": args["code"]}, internals=internals)
        if state.halted is not None:
            raise state.halted
        result = RunResult(**data)
        text = result.for_model()
        notes = run.gateway.notes
        if notes:  # what happened to its calls that the code cannot tell (a skipped call)
            text = "\n".join([text, *notes]) if text else "\n".join(notes)
        if result.finished and not result.error:
            returns = settings.returns
            problem = schema_problem(returns, result.value) if returns is not None else None
            if problem is None:
                state.finished, state.value = True, result.value
                return {"text": cap(text), "error": False, "finished": True}
            path, message = problem
            text += (
                f"\nfinish() rejected: the value does not match the required schema at {path}: {message}. "
                "Fix it and call ctx.manager.finish() again."
            )
            return {"text": cap(text), "error": True}
        return {"text": cap(text), "error": result.error is not None}

    def _refused(self, text: str) -> dict[str, Any]:
        """The code of this call does not run: what the model reads, and the call's
        report says ``skipped``."""
        recorder = self.run.recorder
        if recorder is not None:
            recorder.skipped()
        return {"text": text, "error": True}

    # -- code runs -------------------------------------------------------------------

    async def _run_code(self, code_ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        """The ``main`` of ``agent-code``: one piece of code, alone or in a batch."""
        self.code_ctx = code_ctx
        if not self.run.settings.parallel:
            return (await self._run_codes([args["code"]]))[0].to_json()  # type: ignore[no-any-return]
        # Parallel tool calls: the calls the provider dispatches together run as one
        # sandbox run, each piece a task on the guest's event loop (docs/supervision.md).
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._batch.append((args["code"], future))
        if len(self._batch) == 1:
            self._flusher = asyncio.ensure_future(self._flush_batch())
        return (await future).to_json()  # type: ignore[no-any-return]

    async def _run_codes(self, codes: list[str]) -> list[Any]:
        """One sandbox run of ``codes`` (one piece, or several run together). With a
        journal it is one code run there: one clock base and seed (the recorded ones
        when resumed) and its host calls numbered together, all journaled before the
        model sees their outcome (with the turn's messages, or before the next model
        call: :meth:`~.durable.AgentJournal.model_call`)."""
        run = self.run
        sandbox = self.sandbox
        assert sandbox is not None
        run.gateway.notes = []
        journal = run.journal
        clock = journal.code_run(run.state.steps) if journal is not None else None
        if len(codes) == 1:
            return [await sandbox.run(codes[0], self._tool_limit(), clock=clock)]
        return await sandbox.run_batch(codes, [run.settings.tool_timeout] * len(codes), clock=clock)

    def _tool_limit(self) -> float | None:
        """Seconds one invoke call may take: ``model.tool_timeout``, at most the sandbox's."""
        limit = self.sandbox.limits.timeout  # type: ignore[union-attr]
        timeout = self.run.settings.tool_timeout
        return limit if timeout is None else min(limit, timeout)

    async def _flush_batch(self) -> None:
        """Run the calls that arrived together: wait until no more arrive (a few event
        loop ticks; none when the model's answer had one call), then run them."""
        idle = 0
        turns = self.run.turns
        while idle < SETTLE_TICKS and turns.tool_calls != 1:
            size = len(self._batch)
            await asyncio.sleep(0)
            idle = idle + 1 if len(self._batch) == size else 0
        batch, self._batch = self._batch, []
        try:
            results = await self._run_codes([code for code, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
