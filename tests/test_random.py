"""Random tokens from one buffer of the OS's CSPRNG (agent_apps._random): the shapes of
``secrets``' tokens, each byte handed out once, and a forked child never repeating its
parent's next tokens."""

from __future__ import annotations

import base64
import multiprocessing
import re
import threading
import uuid

from agent_apps import _random


def test_tokens_have_the_shapes_secrets_gives_them():
    assert len(_random.token_bytes(16)) == 16
    assert re.fullmatch(r"[0-9a-f]{12}", _random.token_hex(6))
    token = _random.token_urlsafe(12)
    assert re.fullmatch(r"[A-Za-z0-9_-]{16}", token) and len(base64.urlsafe_b64decode(token)) == 12
    ident = uuid.UUID(hex=_random.uuid4_hex())
    assert (ident.version, ident.variant) == (4, uuid.RFC_4122)
    bits = [_random.randbits(63) for _ in range(200)]
    assert all(0 <= b < 2**63 for b in bits) and max(bits) >= 2**61  # the top bits are drawn too
    assert _random.randbits(1) in (0, 1)


def test_no_byte_is_handed_out_twice_across_refills_and_threads():
    drawn: list[bytes] = []

    def draw() -> None:
        drawn.extend(_random.token_bytes(16) for _ in range(2000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(drawn) == 8000 and len(set(drawn)) == 8000  # 32 KB: the buffer was refilled several times
    assert len(_random.token_bytes(3 * _random.REFILL)) == 3 * _random.REFILL  # larger than a refill


def _child_token(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(_random.token_hex(16))


def test_a_forked_child_does_not_hand_out_its_parents_next_tokens():
    _random.token_hex(16)  # the buffer is filled, with plenty left
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_token, args=(queue,))
    child.start()
    theirs = queue.get(timeout=60)
    child.join(60)
    assert theirs != _random.token_hex(16)
