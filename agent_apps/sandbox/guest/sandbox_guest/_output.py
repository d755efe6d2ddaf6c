"""Bounded capture of what agent code prints.

``print`` output goes back to the model, so it must be bounded: past the limit
text is counted, not stored, and a notice says how much was left out.
"""

import io


class BoundedOutput(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters written to it."""

    def __init__(self, limit: int) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._limit = limit
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        room = self._limit - self._size
        if room >= n:
            self._parts.append(s)
            self._size += n
        elif room > 0:
            self._parts.append(s[:room])
            self._size += room
            self.dropped += n - room
        else:
            self.dropped += n
        return n

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.dropped:
            kb = self._limit // 1024
            text += (
                f"\n[output truncated: {self.dropped} more characters were not shown; "
                f"the limit is {kb} KB per run (output_kb)]"
            )
        return text
