"""A draft streamed in: OpenAI ``chat.completion.chunk`` objects assembled into one draft.

``POST /v1/check/stream`` and :meth:`foureyes.Guard.check_stream` both read the caller's
own model's stream through :class:`DraftAssembler`, so the same chunks give the same
draft, digest and decision, and the same decision as ``POST /v1/check`` on the assembled
draft. Deltas are joined as the ``openai`` SDK's stream helper joins them: ``content``
pieces in order, tool-call pieces by their ``index`` (``id``, ``function.name`` and
``function.arguments`` each concatenated), and the last ``finish_reason`` given.

The draft is judged only when it is whole. The one finish rule
(:func:`foureyes.llm.structured.finish_failure`) decides that: a stream that ends without
a ``finish_reason``, or with ``length`` or ``content_filter``, is a cut-off draft. Such a
draft, or one with a chunk that is not one (not JSON, not a ``chat.completion.chunk``, a
second choice, a tool-call index out of order, text after the finish), is
:meth:`GivenDraft.cut <foureyes.gate.GivenDraft.cut>`: the run falls back with
``draft_failed`` and records why, and nothing of it is released. The rest of the stream is
still read (and bounded) but not assembled.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.gate import GivenDraft, ToolCallRefused
from foureyes.llm.provider import ChatResult
from foureyes.llm.provider import ToolCall as RawToolCall
from foureyes.llm.structured import finish_failure
from foureyes.wire.text import text_problem

__all__ = [
    "DraftAssembler",
    "DraftTooLarge",
    "assemble_draft",
    "line_problem",
    "ndjson_lines",
]


class DraftTooLarge(Exception):
    """The streamed draft's text and arguments passed ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the streamed draft is longer than {limit} characters")
        self.limit = limit


class _Lenient(BaseModel):
    # A chunk carries more than a draft needs (logprobs, usage, system_fingerprint).
    model_config = ConfigDict(extra="ignore", frozen=True)


class _FunctionDelta(_Lenient):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(_Lenient):
    index: int = Field(ge=0)
    id: str | None = None
    type: Literal["function"] | None = None
    function: _FunctionDelta | None = None


class _Delta(_Lenient):
    content: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(_Lenient):
    index: Literal[0]
    delta: _Delta
    finish_reason: str | None = None


class _Chunk(_Lenient):
    object: Literal["chat.completion.chunk"]
    choices: list[_Choice] = Field(max_length=1)


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""


def _as_document(chunk: object) -> object:
    """A chunk as JSON data: a mapping as it is, an ``openai`` SDK model dumped."""
    dump = getattr(chunk, "model_dump", None)
    if not isinstance(chunk, Mapping) and callable(dump):
        return dump(mode="json")
    return chunk


class DraftAssembler:
    """Joins one stream's chunks into a draft; :meth:`draft` once the stream has ended.

    Pure and synchronous: :meth:`add` each chunk in order (a mapping, a line's parsed
    JSON, or an ``openai`` SDK ``ChatCompletionChunk``), then :meth:`draft`.
    """

    def __init__(self, *, max_chars: int, max_tool_calls: int) -> None:
        """Assemble at most ``max_chars`` characters of text and tool-call pieces.

        A draft with more than ``max_tool_calls`` calls is unusable.
        """
        self._max_chars = max_chars
        self._max_calls = max_tool_calls
        self._chars = 0
        self._text: list[str] = []
        self._calls: list[_Call] = []
        self._finish: str | None = None
        self._broken: str | None = None
        self._count = 0

    def add(self, chunk: object) -> None:
        """Take the next chunk; one that is not a chunk makes the draft unusable.

        Raises:
            DraftTooLarge: the draft so far is over ``max_chars``.
        """
        self._count += 1
        if self._broken is not None:
            return
        try:
            parsed = _Chunk.model_validate(_as_document(chunk))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "chunk"
            self._broken = f"chunk {self._count} is not a chat.completion.chunk ({where})"
            return
        for choice in parsed.choices:
            self._take(choice)

    def not_json(self, problem: str) -> None:
        """Record that the next line of the stream is not JSON (``problem``: the parser's)."""
        self._count += 1
        if self._broken is None:
            self._broken = f"chunk {self._count} is not JSON ({problem})"

    def _take(self, choice: _Choice) -> None:
        delta = choice.delta
        if self._finish is not None and (delta.content or delta.tool_calls):
            self._broken = f"chunk {self._count} continues the draft after its finish_reason"
            return
        if delta.content:
            self._grow(len(delta.content))
            self._text.append(delta.content)
        for piece in delta.tool_calls or ():
            if piece.index > len(self._calls) or piece.index >= self._max_calls:
                self._broken = f"chunk {self._count} has tool call index {piece.index} out of order"
                return
            if piece.index == len(self._calls):
                self._calls.append(_Call())
            call = self._calls[piece.index]
            function = piece.function or _FunctionDelta()
            for part in (piece.id, function.name, function.arguments):
                self._grow(len(part or ""))
            call.id += piece.id or ""
            call.name += function.name or ""
            call.arguments += function.arguments or ""
        if choice.finish_reason is not None:
            self._finish = choice.finish_reason

    def _grow(self, chars: int) -> None:
        self._chars += chars
        if self._chars > self._max_chars:
            raise DraftTooLarge(self._max_chars)

    def draft(self) -> GivenDraft:
        """The assembled draft: whole, or :meth:`GivenDraft.cut` saying why it is not."""
        if self._broken is not None:
            return GivenDraft.cut(self._broken)
        text = "".join(self._text)
        calls = [RawToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in self._calls]
        result = ChatResult(
            text=text,
            tool_calls=tuple(calls),
            finish_reason=self._finish,
            latency_s=0.0,
            route="given",
            model="given",
        )
        failure = finish_failure(result, tools_asked=True)
        if failure is not None:
            return GivenDraft.cut(
                f"the stream ended {failure.value} (finish_reason {self._finish})"
            )
        for field, value in [("content", text)] + [
            (f"tool_calls.{i}", c.id + c.name + c.arguments) for i, c in enumerate(calls)
        ]:
            if (problem := text_problem(value)) is not None:
                return GivenDraft.cut(f"{field}: {problem}")
        openai = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
        if not text and not openai:
            return GivenDraft.cut("the stream finished with neither text nor tool calls")
        try:
            return GivenDraft.of_openai(text, openai)
        except ToolCallRefused as exc:
            return GivenDraft.cut(f"tool_calls.{exc.index}: {exc.problem.value}: {exc}")


async def assemble_draft(
    chunks: AsyncIterable[object], *, max_chars: int, max_tool_calls: int
) -> GivenDraft:
    """The draft ``chunks`` stream in (see :class:`DraftAssembler`), once they end.

    Raises:
        DraftTooLarge: the draft is over ``max_chars``.
    """
    assembler = DraftAssembler(max_chars=max_chars, max_tool_calls=max_tool_calls)
    async for chunk in chunks:
        if isinstance(chunk, _NotJson):
            assembler.not_json(chunk.problem)
        else:
            assembler.add(chunk)
    return assembler.draft()


class _NotJson:
    """A line of an NDJSON body that is not JSON."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _parse(line: bytes) -> object:
    try:
        return json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return _NotJson("not UTF-8")
    except json.JSONDecodeError as exc:
        return _NotJson(f"{exc.msg} at position {exc.pos}")
    except RecursionError:
        return _NotJson("nested too deeply")


async def ndjson_lines(body: AsyncIterable[bytes]) -> AsyncIterator[object]:
    """The parsed lines of an NDJSON body as they arrive (blank lines skipped).

    A line that is not JSON is yielded as a marker: :func:`assemble_draft` records it,
    and :func:`line_problem` says what it is (for the first line, which is refused).
    """
    buffer = bytearray()
    async for piece in body:
        start = len(buffer)
        buffer += piece
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            start = 0
            if line.strip():
                yield _parse(line)
    if buffer.strip():
        yield _parse(bytes(buffer))


def line_problem(line: object) -> str | None:
    """Why a line of :func:`ndjson_lines` is not JSON, or ``None`` for a parsed one."""
    return line.problem if isinstance(line, _NotJson) else None
