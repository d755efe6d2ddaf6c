"""What agent code sees: ``ctx.manager.invoke``, ``ctx.manager.finish``, ``HostError``.

Calls are JSON only: arguments are encoded here (so a non-JSON argument fails
on the agent's own line with a clear TypeError) and decoded host-side again.
"""

from json import dumps as _dumps  # bound now: agent code patching json must not break us


class HostError(Exception):
    """A call that left the sandbox failed on the host.

    ``type`` is the host error's class name (``ToolNotAllowed``, ``ArgsInvalid``,
    ``SkillFailed``, ...); the exception's class is a subclass of HostError with
    that same name, so ``except HostError`` catches them all and the traceback
    reads ``ToolNotAllowed: ...``.
    """

    type = "HostError"

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


_error_classes: dict[str, type[HostError]] = {"HostError": HostError}


def host_error(payload) -> HostError:
    """Build the guest exception for a host error payload {"type", "message"}."""
    if not isinstance(payload, dict):
        payload = {"type": "HostError", "message": str(payload)}
    name = payload.get("type")
    if not isinstance(name, str) or not name.isidentifier():
        name = "HostError"
    cls = _error_classes.get(name)
    if cls is None:
        # __module__ "builtins" makes tracebacks print the bare class name.
        new: type[HostError] = type(name, (HostError,), {"type": name, "__module__": "builtins"})
        cls = _error_classes[name] = new
    return cls(str(payload.get("message", "")))


class Finish(BaseException):
    """Raised by ``ctx.manager.finish`` to end the run; BaseException so that
    ``except Exception`` in agent code does not swallow it."""


class Manager:
    """``ctx.manager`` inside the sandbox."""

    __slots__ = ("_runner",)

    def __init__(self, runner) -> None:
        self._runner = runner

    def invoke(self, name, args=None):
        """Invoke the skill ``name`` with ``args`` (a JSON object) on the host.

        Returns an awaitable; ``await`` it for the skill's result. Several
        invokes gathered with ``asyncio.gather`` run concurrently on the host.
        """
        if not isinstance(name, str):
            raise TypeError(f"ctx.manager.invoke() name must be a str, not {type(name).__name__}")
        if args is not None and not isinstance(args, dict):
            raise TypeError(
                f"ctx.manager.invoke() args must be a dict or None, not {type(args).__name__}"
            )
        try:
            encoded = "null" if args is None else _dumps(args, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"ctx.manager.invoke({name!r}) args must be JSON-serializable "
                f"(dict, list, str, int, float, bool, None): {e}"
            ) from None
        return self._runner.submit(name, encoded)

    def finish(self, value=None):
        """End the run now; ``value`` (JSON-serializable) becomes its result."""
        self._runner.finish(value)

    def __repr__(self) -> str:
        return "<ctx.manager: invoke(name, args=None), finish(value)>"


class Ctx:
    """``ctx`` inside the sandbox: only ``ctx.manager`` is available."""

    __slots__ = ("manager",)

    def __init__(self, runner) -> None:
        self.manager = Manager(runner)

    def __repr__(self) -> str:
        return "<ctx: ctx.manager.invoke(name, args), ctx.manager.finish(value)>"
