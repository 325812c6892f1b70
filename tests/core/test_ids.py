import datetime as dt
import os
import re
import select
import signal
import threading

import pytest

from foureyes.core import ids
from foureyes.core.errors import UsageError
from foureyes.core.ids import random_hex
from foureyes.core.tenancy import new_conversation_id
from foureyes.store.traces import new_trace_id

HEX = re.compile(r"[0-9a-f]*")


@pytest.mark.parametrize("nbytes", [1, 10, 16, 4095, 4096, 4097, 10_000])
def test_random_hex_has_two_lowercase_digits_per_byte(nbytes: int) -> None:
    value = random_hex(nbytes)
    assert len(value) == 2 * nbytes
    assert HEX.fullmatch(value)


@pytest.mark.parametrize("nbytes", [0, -1, True, 1.5, "16", None])
def test_random_hex_refuses_a_count_that_is_not_a_positive_integer(nbytes: object) -> None:
    with pytest.raises(UsageError, match="positive number of bytes"):
        random_hex(nbytes)  # type: ignore[arg-type]


def test_each_byte_read_ahead_is_handed_out_once() -> None:
    # Several blocks' worth of ids: none repeats, and the bytes of consecutive ids are
    # consecutive slices of what the pool read (no byte skipped twice or reused).
    drawn = [random_hex(10) for _ in range(2_000)]
    assert len(set(drawn)) == len(drawn)
    reads: list[bytes] = []

    def urandom(count: int) -> bytes:
        reads.append(os.urandom(count))
        return reads[-1]

    pool = ids._Pool(urandom)
    taken = b"".join(pool.take(n) for n in [7, 4000, 100, 5000, 3])
    # 7 + 4000 fit the first block; 100 needs a new one; 5000 is bigger than a block and
    # gets a read of its own; 3 starts the last.
    assert [len(r) for r in reads] == [4096, 4096, 5000, 4096]
    assert taken == reads[0][:4007] + reads[1][:100] + reads[2] + reads[3][:3]


def test_threads_drawing_at_once_never_get_the_same_id() -> None:
    drawn: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def draw(into: list[str]) -> None:
        start.wait()
        into.extend(random_hex(8) for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for into in drawn for value in into]
    assert len(set(every)) == len(every) == 16_000


def _in_child(child_work: object) -> str:
    """What ``child_work()`` returns in a forked child, read back through a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_end)
            os.write(write_end, str(child_work()).encode())  # type: ignore[operator]
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        # A guard against a child that hangs (a lock it inherited held), not a measure.
        ready, _, _ = select.select([read_end], [], [], 60)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        out = os.read(read_end, 1024).decode() if ready else "hung"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_hand_out_its_parents_bytes() -> None:
    random_hex(1)  # the pool holds bytes read ahead
    child = _in_child(lambda: random_hex(16))
    parent = random_hex(16)
    assert HEX.fullmatch(child) and len(child) == 32
    # Without the fork hook both would take the same next 16 bytes of one block.
    assert child != parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_while_the_pool_is_locked_can_still_draw() -> None:
    with ids._POOL._lock:  # as if another thread were drawing at the fork
        child = _in_child(lambda: random_hex(4))
    assert HEX.fullmatch(child) and len(child) == 8, child


def test_run_and_conversation_ids_cost_a_read_per_block_not_per_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each id was an os.urandom call (a system call releasing the interpreter's lock);
    # from the pool, a read serves about 4096 bytes of ids (benchmarks/README.md,
    # "Random ids from a pool").
    reads: list[int] = []

    def urandom(count: int) -> bytes:
        reads.append(count)
        return os.urandom(count)

    monkeypatch.setattr(ids, "_POOL", ids._Pool(urandom))
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    runs = {new_trace_id(now) for _ in range(1_000)}
    conversations = {new_conversation_id() for _ in range(1_000)}
    assert len(runs) == len(conversations) == 1_000
    assert len(reads) == -(-(1_000 * 10 + 1_000 * 12) // 4096)
