"""The queued log handler: a sink that stops reading costs counted lines, never a wait."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import threading
from typing import Any

import pytest

from foureyes.server._logging import (
    JsonFormatter,
    QueuedStreamHandler,
    dropped_log_lines,
    log_event,
    logging_config,
)

WAIT_S = 30.0
"""How long a test waits for the writer thread: a bound on a hang, never a measurement."""


class GatedStream(io.StringIO):
    """A stream whose writes block until the test opens the gate (a full pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")

    def write(self, text: str) -> int:
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return super().write(text)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


class BrokenStream(io.StringIO):
    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")

    def write(self, text: str) -> int:
        raise OSError("the collector went away")


def _logger(handler: logging.Handler, name: str) -> logging.Logger:
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(f"foureyes.test.queue.{name}")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def _written(stream: GatedStream, handler: QueuedStreamHandler) -> list[dict[str, Any]]:
    stream.gate.set()
    handler.close()
    return stream.lines()


def test_a_blocked_sink_drops_and_counts_the_lines_beyond_the_queue_then_says_so() -> None:
    stream = GatedStream()
    handler = QueuedStreamHandler(stream, capacity=5)
    logger = _logger(handler, "blocked")
    before = dropped_log_lines()
    log_event(logger, "first")  # the writer takes it, and blocks writing it
    assert stream.entered.wait(WAIT_S)
    for n in range(20):  # returns at once every time: 5 queued, 15 dropped
        log_event(logger, "line", n=n)
    assert dropped_log_lines() - before == 15

    lines = _written(stream, handler)

    assert [line.get("n") for line in lines if line["event"] == "line"] == [0, 1, 2, 3, 4]
    notes = [line for line in lines if line["event"] == "log_lines_dropped"]
    assert len(notes) == 1
    assert notes[0]["dropped"] == 15 and notes[0]["level"] == "warning"
    assert notes[0]["dropped_total"] == dropped_log_lines()
    assert lines[0]["event"] == "first" and lines[-1] == notes[0]  # said once it caught up


def test_nothing_dropped_means_no_note_and_every_line_in_order() -> None:
    stream = GatedStream()
    stream.gate.set()
    handler = QueuedStreamHandler(stream, capacity=1000)
    logger = _logger(handler, "calm")
    before = dropped_log_lines()
    for n in range(300):
        log_event(logger, "line", n=n)

    lines = _written(stream, handler)

    assert [line["n"] for line in lines] == list(range(300))
    assert dropped_log_lines() == before


def test_flush_waits_for_the_batch_the_writer_holds_not_only_for_an_empty_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The line a writer has taken off the queue is not written yet; a flush that returned
    # on an empty queue lost the last batch when SIGTERM ended the process.
    monkeypatch.setattr("foureyes.server._logging._CLOSE_WAIT_S", WAIT_S)
    stream = GatedStream()
    handler = QueuedStreamHandler(stream, capacity=10)
    logger = _logger(handler, "in-flight")
    log_event(logger, "last")
    assert stream.entered.wait(WAIT_S)  # taken off the queue, blocked writing it
    seen: list[str] = []
    flushing = threading.Thread(target=lambda: (handler.flush(), seen.append(stream.getvalue())))
    flushing.start()
    flushing.join(0.5)
    assert flushing.is_alive()  # the gate is shut: nothing was written, so it still waits
    stream.gate.set()
    flushing.join(WAIT_S)
    [line] = [json.loads(text) for text in seen[0].splitlines()]
    assert line["event"] == "last"
    handler.close()


def test_flush_gives_up_on_a_writer_that_makes_no_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("foureyes.server._logging._CLOSE_WAIT_S", 0.2)
    stream = GatedStream()
    handler = QueuedStreamHandler(stream, capacity=10)
    logger = _logger(handler, "stalled")
    log_event(logger, "stuck")
    assert stream.entered.wait(WAIT_S)
    flushing = threading.Thread(target=handler.flush)
    flushing.start()
    flushing.join(WAIT_S)
    assert not flushing.is_alive()  # a sink that stopped reading does not hold it forever
    assert stream.getvalue() == ""
    stream.gate.set()
    handler.close()


def test_a_sink_whose_writes_fail_counts_its_lines_as_dropped() -> None:
    handler = QueuedStreamHandler(BrokenStream(), capacity=100)
    logger = _logger(handler, "broken")
    before = dropped_log_lines()
    for n in range(7):
        log_event(logger, "line", n=n)
    handler.close()  # waits for the writer, which lost all seven (and its note)
    assert dropped_log_lines() - before == 7


def test_lines_go_to_the_descriptor_of_a_real_pipe(tmp_path: Any) -> None:
    path = tmp_path / "log"
    with path.open("w", encoding="utf-8") as stream:
        handler = QueuedStreamHandler(stream, capacity=10)
        logger = _logger(handler, "fd")
        log_event(logger, "ünïcode", text_len=3)
        handler.close()
    [line] = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert line["event"] == "ünïcode" and line["text_len"] == 3


def test_a_closed_handler_drops_instead_of_queueing() -> None:
    stream = GatedStream()
    stream.gate.set()
    handler = QueuedStreamHandler(stream, capacity=10)
    logger = _logger(handler, "closed")
    handler.close()
    before = dropped_log_lines()
    log_event(logger, "late")
    assert dropped_log_lines() - before == 1


@pytest.mark.parametrize("capacity", [0, -3])
def test_a_queue_of_no_lines_is_refused(capacity: int) -> None:
    with pytest.raises(ValueError, match="capacity"):
        QueuedStreamHandler(io.StringIO(), capacity=capacity)


def test_the_serve_config_queues_every_logger_including_the_root() -> None:
    config = logging_config(queue_lines=123)
    handler = config["handlers"]["stderr"]
    assert handler["()"] is QueuedStreamHandler and handler["capacity"] == 123
    assert config["root"]["handlers"] == ["stderr"]
    for name in ("foureyes", "uvicorn"):
        assert config["loggers"][name]["handlers"] == ["stderr"]


def test_the_library_installs_no_handler_that_could_block_its_host() -> None:
    # A host that configured no logging: without foureyes' NullHandler, this warning would
    # be written to stderr by logging.lastResort on the thread that logged.
    script = (
        "import logging, foureyes; from foureyes import Guard; "
        "logging.getLogger('foureyes.gate').warning('a warning'); "
        "print(sorted(type(h).__name__ for h in logging.getLogger('foureyes').handlers), "
        "len(logging.getLogger().handlers))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.split() == ["['NullHandler']", "0"]


_TERMINATED_SCRIPT = """
import logging, os, signal, sys
from foureyes.server._logging import configure_logging, log_event
if sys.argv[1] == "host":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(7))
configure_logging(queue_lines=100_000)
logger = logging.getLogger("foureyes.server")
for n in range(int(sys.argv[2])):
    log_event(logger, "line", n=n)
# What uvicorn does after a graceful shutdown: SIGTERM again, with the handler it found.
signal.raise_signal(signal.SIGTERM)
"""


def test_a_process_ended_by_sigterm_writes_every_queued_line_first() -> None:
    count = 3_000
    result = subprocess.run(
        [sys.executable, "-c", _TERMINATED_SCRIPT, "serve", str(count)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Ended as SIGTERM's default action ends a process, and nothing was left in the queue.
    assert result.returncode == -15
    numbers = [json.loads(line)["n"] for line in result.stderr.splitlines()]
    assert numbers == list(range(count))


def test_a_host_s_own_sigterm_handler_is_left_in_place() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _TERMINATED_SCRIPT, "host", "10"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 7


def test_a_batch_is_written_in_whole_lines_of_at_most_pipe_buf_bytes() -> None:
    # Workers share one stderr: a write to a pipe of at most PIPE_BUF bytes is never
    # interleaved with another process's, so a batch must not be one long write.
    import select

    from foureyes.server._logging import _atomic_chunks

    lines = [json.dumps({"event": "line", "n": n, "pad": "x" * 200}) for n in range(100)]
    chunks = _atomic_chunks(lines)
    assert len(chunks) > 1 and all(len(c) <= select.PIPE_BUF for c in chunks)
    assert all(c.endswith(b"\n") for c in chunks)
    assert b"".join(chunks).decode().splitlines() == lines
    [alone] = _atomic_chunks(["y" * (select.PIPE_BUF + 10)])  # too long to be atomic anyway
    assert len(alone) == select.PIPE_BUF + 11
