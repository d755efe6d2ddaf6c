"""What agent code sees: ``ctx.manager.invoke``, ``ctx.manager.finish``,
``ctx.manager.next``, ``target`` (middleware mode) and ``HostError``.

Calls are JSON only: arguments and call options are encoded here (so a non-JSON
argument fails on the agent's own line with a clear TypeError) and decoded and
checked host-side again.
"""

from json import JSONEncoder
from json import dumps as _dumps  # bound now: agent code patching json must not break us

#: ``json.dumps(value, allow_nan=False)`` without building an encoder per call.
strict_dumps = JSONEncoder(allow_nan=False).encode


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
    """``ctx.manager`` inside the sandbox (also ``target.manager`` in middleware mode)."""

    __slots__ = ("_runner",)

    def __init__(self, runner) -> None:
        self._runner = runner

    def invoke(self, name, args=None, *, middleware=None):
        """Invoke the skill ``name`` with ``args`` (a JSON object) on the host.

        ``middleware``: middleware to wrap this one call in, each written ``"name"``
        or ``"name(key=value)"`` (checked on the host: only middleware skills this
        code may call). Returns an awaitable; ``await`` it for the skill's result.
        Several invokes gathered with ``asyncio.gather`` run concurrently on the host.
        """
        if not isinstance(name, str):
            raise TypeError(f"ctx.manager.invoke() name must be a str, not {type(name).__name__}")
        options = None
        if middleware is not None:
            if isinstance(middleware, str):
                middleware = [middleware]
            if not isinstance(middleware, (list, tuple)) or not all(isinstance(m, str) for m in middleware):
                raise TypeError(
                    f"ctx.manager.invoke({name!r}) middleware must be a list of strings like "
                    f"'name' or 'name(key=value)', not {middleware!r}"
                )
            options = _dumps({"middleware": list(middleware)})
        return self._runner.submit(name, _encode(f"ctx.manager.invoke({name!r})", args), options)

    def finish(self, value=None):
        """End the run now; ``value`` (JSON-serializable) becomes its result."""
        self._runner.finish(value)

    def next(self, args=None):
        """(Middleware mode) run the call this agent serves (``target``) and return
        an awaitable of its result; ``args`` replaces its args. At most once."""
        target = self._runner.target
        if target is None:
            raise RuntimeError(
                "ctx.manager.next() is only available when this agent serves as middleware "
                "(then `target` is the call it serves)"
            )
        if args is None:
            args = target.args
        return self._runner.submit(target.skill, _encode("ctx.manager.next()", args), '{"next":true}')

    def __repr__(self) -> str:
        return "<ctx.manager: invoke(name, args=None, middleware=None), finish(value), next(args=None)>"


def _encode(call: str, args) -> str:
    if args is not None and not isinstance(args, dict):
        raise TypeError(f"{call} args must be a dict or None, not {type(args).__name__}")
    try:
        return "null" if args is None else strict_dumps(args)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{call} args must be JSON-serializable (dict, list, str, int, float, bool, None): {e}"
        ) from None


class Target:
    """``target`` inside the sandbox when the agent serves as middleware: the call it
    wraps. ``skill`` is the skill's name, ``args`` its args (a dict; changes to it
    are what ``next()`` sends), ``manager.next()`` runs it."""

    __slots__ = ("args", "manager", "skill")

    def __init__(self, manager: Manager, skill: str, args: dict) -> None:
        self.manager = manager
        self.skill = skill
        self.args = args

    def __repr__(self) -> str:
        return f"<target: the call of {self.skill!r} this agent serves; target.args, await target.manager.next()>"


class Ctx:
    """``ctx`` inside the sandbox: only ``ctx.manager`` is available."""

    __slots__ = ("manager",)

    def __init__(self, runner) -> None:
        self.manager = Manager(runner)

    def __repr__(self) -> str:
        return "<ctx: ctx.manager.invoke(name, args), ctx.manager.finish(value)>"
