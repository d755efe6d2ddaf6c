"""Many runs of one skill: ``cm.batch(...)`` and ``agent-apps batch`` (docs/batch.md).

::

    inputs = [{"text": "a b"}, {"text": "c"}]
    async with cm.batch("word-count", inputs, concurrency=8) as results:
        async for r in results:              # in completion order
            print(r.index, r.ok, r.result if r.ok else r.error)

Locally the runs share this process (its sandbox pool stays warm across them), at most
``concurrency`` at once. With ``ray="auto"`` (or a cluster address) they are spread
over a Ray cluster instead: one worker process per CPU, each with one ContextManager
built from this manager's search path and config (:mod:`agent_apps.batch.ray`, which
only that imports).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError
from ..run_record import id_problem
from .runner import BatchInput, BatchResult, default_concurrency, run_local

if TYPE_CHECKING:
    from ..manager import ContextManager
    from .ray import RayRunner

__all__ = ["Batch", "BatchInput", "BatchResult", "default_concurrency"]


class Batch:
    """One batch (``cm.batch(ref, inputs, ...)``): an async iterator of
    :class:`BatchResult` in completion order, and an async context manager whose exit
    cancels the runs still in flight (and stops the Ray workers).

    ``inputs``: args mappings (the index of each is its position), or
    :class:`BatchInput` items with explicit indexes (what ``agent-apps batch --resume``
    passes); sync or async iterables, read as runs finish. ``concurrency``: runs in flight
    at once (default: :func:`default_concurrency`; on Ray, 4 per worker). ``ray``:
    ``"auto"`` (the cluster this machine belongs to, else a new local one) or a cluster
    address; ``retries``: on Ray, how often an input whose worker died is run again.
    ``config``: the call layer of the config cascade, for every run; ``tenant``: the
    tenant every run serves (``ctx.run.tenant_id``, kept with each run in the store).
    """

    def __init__(
        self,
        cm: ContextManager,
        ref: Any,
        inputs: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int | None = None,
        ray: str | None = None,
        retries: int = 3,
        config: Mapping[str, Any] | None = None,
        tenant: str | None = None,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if retries < 0:
            raise ValueError("retries must be at least 0")
        self.cm = cm
        self.skill = cm._resolve(ref, None)
        if config:
            cm.check_call_config(config)
        if tenant is not None:
            problem = id_problem(tenant, "tenant id")
            if problem:
                raise ValueError(f"tenant: {problem}")
        self.inputs = inputs
        #: What every run takes (``invoke``'s ``config`` and ``tenant`` options).
        self.run_options: dict[str, Any] = {"config": dict(config)} if config else {}
        if tenant is not None:
            self.run_options["tenant"] = tenant
        self.ray = ray
        self.retries = retries
        #: Runs in flight at once (known once started, on Ray).
        self.concurrency: int | None = concurrency
        #: Ray worker processes (None: local).
        self.workers: int | None = None
        self._runner: RayRunner | None = None
        self._iterator: AsyncGenerator[BatchResult, None] | None = None
        if ray is None and concurrency is None:
            self.concurrency = default_concurrency(cm, self.skill)

    async def start(self) -> None:
        """Connect to Ray and start the workers (local batches have nothing to start);
        iterating starts the batch too. Raises :class:`AgentAppsError` when a worker
        cannot build its ContextManager or find the skill."""
        if self.ray is None or self._runner is not None:
            return
        from .ray import RayRunner

        if self.cm.catalog.skills.get(self.skill.name) is not self.skill:
            raise AgentAppsError(
                f"a batch on Ray runs a skill of the search path by name, not {self.skill.where()}: "
                "put the file in a directory and add it with --path (the search path is shipped to the cluster)",
                skill=self.skill.name,
            )
        runner = RayRunner(self.cm, self.skill, address=self.ray, retries=self.retries, run_options=self.run_options)
        await runner.start(self.concurrency)
        self._runner = runner
        self.concurrency, self.workers = runner.concurrency, runner.workers

    def __aiter__(self) -> AsyncGenerator[BatchResult, None]:
        if self._iterator is None:
            self._iterator = self._results()
        return self._iterator

    async def _results(self) -> AsyncGenerator[BatchResult, None]:
        if self.ray is None:
            assert self.concurrency is not None
            results = run_local(
                self.cm, self.skill, self.inputs, concurrency=self.concurrency, run_options=self.run_options
            )
        else:
            await self.start()
            assert self._runner is not None
            results = self._runner.results(self.inputs)
        try:
            async for result in results:
                yield result
        finally:
            await results.aclose()
            await self._stop_workers()

    async def aclose(self) -> None:
        """Cancel the runs in flight; stop the Ray workers (and the cluster this batch started)."""
        if self._iterator is not None:
            await self._iterator.aclose()
        await self._stop_workers()

    async def _stop_workers(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.close()

    async def __aenter__(self) -> Batch:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
