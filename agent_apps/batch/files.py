"""The files of ``agent-apps batch``: the JSONL input, the JSONL results, and resuming.

* **Input**: one JSON object of args per line. The index of a line is its number
  counting from 0; blank lines are not inputs. Lines are read with the bounded JSON
  reader (:mod:`agent_apps._json`): a line that is not UTF-8 or not JSON, holds
  ``NaN`` or a number too large, nests deeper than 128 levels, or is not an object is
  that input's ``InputInvalid`` error, naming the file and line; the others run.
* **Results**: one line per input, ``{"index", "ok", "result" | "error", "run_id",
  "seconds", "input_hash"}``, appended as each run finishes, each line written whole
  by one ``write`` (so Ctrl-C, or a kill, leaves only whole lines: a machine crash at
  worst a cut last line, which resuming removes).
* **Resuming** skips the indexes that have a result line. ``input_hash`` (a hash of the
  skill name and the input line) must match the input line of the same index: a results
  file made from another input file, another skill or an edited input is refused. An
  input whose run started but wrote no line (the batch was killed) is taken up from
  that run's journal (``store.batch_runs`` says which run it was).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._json import MAX_DEPTH, loads
from .runner import BatchInput, BatchResult

__all__ = ["Done", "InputFile", "ResultsFile", "ResumeError", "drop_failed", "input_hash", "read_results"]


class ResumeError(Exception):
    """The results file cannot be continued (named, with the line)."""


def input_hash(name: str, line: bytes) -> str:
    """The fingerprint of one input line for skill ``name`` (16 hex digits)."""
    return hashlib.sha256(name.encode() + b"\n" + line.strip()).hexdigest()[:16]


class InputFile:
    """The input file, read line by line (never held whole)."""

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        self.path = Path(path)
        self.name = name
        #: The hash of each index handed out and not yet written (see :meth:`ResultsFile.write`).
        self.hashes: dict[int, str] = {}

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """``(index, line)`` for each line that is not blank."""
        with self.path.open("rb") as fh:
            for index, raw in enumerate(fh):
                line = raw.strip()
                if line:
                    yield index, line

    def check(self, done: dict[int, Done]) -> int:
        """Count the inputs, and check that every result of ``done`` was made from the
        input line of its index; raises :class:`ResumeError` naming both lines."""
        total = 0
        seen = 0
        for index, line in self.lines():
            total += 1
            result = done.get(index)
            if result is not None:
                seen += 1
                if result.input_hash != input_hash(self.name, line):
                    raise ResumeError(self._mismatch(result, f"differs from line {index + 1} of {self.path}"))
        if seen < len(done):
            lines = {index for index, _ in self.lines()}
            stray = min((r for i, r in done.items() if i not in lines), key=lambda r: r.line)
            raise ResumeError(self._mismatch(stray, f"has no input: line {stray.index + 1} of {self.path} is blank "
                                                    "or past its end"))
        return total

    def _mismatch(self, result: Done, why: str) -> str:
        if not result.ok:  # the line of a run that failed, fixed since: the usual case
            fix = "that run failed: add --rerun-failed to run the failed inputs again, as they are now"
        else:
            fix = "resume with the same --input and NAME, or write to a new --output"
        return (
            f"{result.file}:{result.line}: the result for index {result.index} was not made from this input with "
            f"{self.name} ({why}): {fix}"
        )

    def inputs(
        self,
        skip: set[int] | dict[int, Any],
        *,
        batch: str | None = None,
        runs: Mapping[int, tuple[str | None, str]] | None = None,
    ) -> Iterator[BatchInput]:
        """The inputs not in ``skip``, parsed; a bad line is an input with an error.
        ``batch``: the results file their runs are recorded for; ``runs``: the run an
        earlier attempt of an input started (``{index: (input hash, run id)}``), taken
        up when the line is still the one it ran."""
        for index, line in self.lines():
            if index in skip:
                continue
            hashed = self.hashes[index] = input_hash(self.name, line)
            earlier = (runs or {}).get(index)
            run_id = earlier[1] if earlier is not None and earlier[0] == hashed else None
            where = f"{self.path}:{index + 1}"
            try:
                args = loads(line.decode("utf-8-sig"))
            except UnicodeDecodeError:
                yield BatchInput(index, error=f"{where}: not UTF-8 text")
                continue
            except json.JSONDecodeError as exc:
                yield BatchInput(index, error=f"{where}: not JSON: {exc.msg} (column {exc.colno})")
                continue
            except ValueError as exc:  # nested deeper than MAX_DEPTH, NaN, a number too large
                yield BatchInput(index, error=f"{where}: {exc}")
                continue
            if not isinstance(args, dict):
                kind = "an array" if isinstance(args, list) else "null" if args is None else f"a {type(args).__name__}"
                yield BatchInput(index, error=f"{where}: expected a JSON object of args, got {kind}")
                continue
            yield BatchInput(index, args, batch=batch, input_hash=hashed, run_id=run_id)


@dataclass(frozen=True, slots=True)
class Done:
    """A result line already in the results file."""

    index: int
    ok: bool
    input_hash: str | None
    file: str
    line: int
    error_type: str | None = field(default=None)


def read_results(path: str | os.PathLike[str], *, repair: bool = True) -> tuple[dict[int, Done], str | None]:
    """The result lines of ``path`` by index (empty if it does not exist), and a note
    when the last line was cut short (a crash mid-write) and was removed (``repair``).
    Any other line that is not a result line raises :class:`ResumeError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    done: dict[int, Done] = {}
    note = None
    complete = data.rfind(b"\n") + 1
    if complete < len(data):  # every line is written with its newline: this one was cut
        tail = data[complete:]
        if _parse(tail) is not None:
            data += b"\n"  # whole after all, only its newline is missing
            if repair:
                with path.open("ab") as fh:
                    fh.write(b"\n")
        else:
            if repair:
                os.truncate(path, complete)
            note = f"{path}: removed its last line, cut short ({len(tail)} bytes): its input runs again"
            data = data[:complete]
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        parsed = _parse(raw)
        if parsed is None:
            raise ResumeError(f"{path}:{number}: not a result line of agent-apps batch (expected a JSON object with "
                              "an integer 'index' and a boolean 'ok')")
        index, ok, hashed, error_type = parsed
        if index in done:
            raise ResumeError(f"{path}:{number}: a second result for index {index} (the first is on line "
                              f"{done[index].line}): the file was edited or concatenated")
        done[index] = Done(index, ok, hashed, str(path), number, error_type)
    return done, note


def _parse(raw: bytes) -> tuple[int, bool, str | None, str | None] | None:
    try:  # a result (at most MAX_DEPTH deep) sits two levels down: error.partial
        data = loads(raw.decode("utf-8"), max_depth=MAX_DEPTH + 2)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    index, ok = data.get("index"), data.get("ok")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0 or not isinstance(ok, bool):
        return None
    hashed = data.get("input_hash")
    error = data.get("error")
    error_type = error.get("type") if isinstance(error, dict) else None
    return index, ok, hashed if isinstance(hashed, str) else None, error_type


def drop_failed(path: str | os.PathLike[str]) -> int:
    """Rewrite the results file without its failed lines (``--rerun-failed``), atomically;
    returns how many were dropped."""
    path = Path(path)
    kept: list[bytes] = []
    dropped = 0
    for raw in path.read_bytes().splitlines(keepends=True):
        parsed = _parse(raw)
        if parsed is not None and not parsed[1]:
            dropped += 1
        else:
            kept.append(raw)
    if dropped:
        temporary = path.with_name(path.name + ".rerun")
        with temporary.open("wb") as fh:
            fh.writelines(kept)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    return dropped


class ResultsFile:
    """The results file, appended one whole line per result."""

    def __init__(self, path: str | os.PathLike[str], inputs: InputFile) -> None:
        self.path = Path(path)
        self.inputs = inputs
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, result: BatchResult) -> BatchResult:
        """Append ``result``'s line; returns the result as written (a result that is not
        JSON becomes that input's error)."""
        data = result.to_json()
        data["input_hash"] = self.inputs.hashes.pop(result.index, None)
        try:
            text = json.dumps(data, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            message = f"the result is not JSON ({exc}): a batch writes its results as JSON lines"
            result = BatchResult(result.index, False, error={"type": "ResultInvalid", "message": message},
                                 run_id=result.run_id, seconds=result.seconds, worker=result.worker)
            data = {**result.to_json(), "input_hash": data["input_hash"]}
            text = json.dumps(data, ensure_ascii=False)
        try:
            line = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a string: escape it
            line = (json.dumps(data) + "\n").encode("ascii")
        view = memoryview(line)
        while view:  # one write for any line a regular file takes whole
            view = view[os.write(self._fd, view):]
        return result

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
