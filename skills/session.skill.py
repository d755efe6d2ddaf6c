"""The agent's default middleware: stores each agent run's trace with the run.

It runs where ``$agent`` stands in a middleware list (the bundled defaults put it in the
global list), as part of ``model.middleware``: around every agent run. After the run, and
whatever ended it, the trace of every hook event (``ctx.locals["agent"]["trace"]``) is
stored with the run in the state store, where ``agent-apps runs show RUN`` finds it.
Runs whose ``model.retention`` is not ``permanent`` keep no content, so their trace is
not stored. The run writes it in the transaction that ends it, asked through
``ctx.locals[STORE_TRACE]``; this middleware writes it itself only when the run could
not (it failed before it began recording).
"""

from agent_apps.agent.recorder import STORE_TRACE

frontmatter = {
    "name": "session",
    "description": "Agent middleware: stores each agent run's trace with the run in the state store.",
    "metadata": {"role": "middleware", "visibility": "hidden", "tags": ["meta-internal"]},
}


async def main(ctx, args):
    request = ctx.locals[STORE_TRACE] = {}
    try:
        return await ctx.manager.next()
    finally:
        state = ctx.locals.get("agent")
        stored = request.get("stored")
        if not stored and isinstance(state, dict) and state.get("agent_id") and state.get("retention") == "permanent":
            store = ctx.manager.context_manager.state
            await store.call(store.runs.save_trace, state["run_id"], state["agent_id"], list(state["trace"]))
