"""The library API: foureyes inside your own Python process (docs/library.md).

::

    async with Guard.open() as guard:          # offline routes, ./foureyes.db
        outcome = await guard.check(messages, "the reply my app would send")
        outcome.decision, outcome.text

:class:`Guard` opens the same :class:`~foureyes.pipeline.Runtime` as ``foureyes serve``
and turns OpenAI-format input into the same pipeline calls as the gateway, through the
gateway's own request models and their translation (:mod:`foureyes.wire`, which loads
no web framework): :meth:`Guard.check` is ``POST /v1/check``,
:meth:`Guard.check_stream` is ``POST /v1/check/stream``, :meth:`Guard.reply` is
``POST /v1/chat/completions`` and :meth:`Guard.triage` is ``POST /v1/assess`` (under
the ``local`` tenant, as a caller without an API key), so the same input gets the same
decision and the same digests. :meth:`Guard.project` and :meth:`Guard.review` are the
masked review of ``POST /v1/review``; :meth:`Guard.deliberate_tool` and
:meth:`Guard.deliberate` are the ``deliberate`` tool an agent calls for a review of its
own recent steps.
:meth:`Guard.check_tool_calls` is the gate's rules alone on tool calls (no model, no
record), for a host that runs tools before it has a final reply.

Bad input is a :class:`~foureyes.core.errors.ContractError` (``schema`` names the call,
``reason`` is ``invalid_input``, ``detail`` the field at fault) raised before anything
runs or is recorded; a session that is not one is its subclass
:class:`~foureyes.review.session.SessionFormatError`. A call on a closed guard is a
:class:`~foureyes.core.errors.UsageError`.

:class:`SyncGuard` is the same API for scripts, blocking: its calls run on an event loop
of its own in a thread of its own, so it also works where a loop is already running (a
notebook, a handler), though it blocks that loop while a call runs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.config import Config, load_config
from foureyes.core.errors import ContractError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.core.validation import explain_errors
from foureyes.gate import CrisisReply, GivenDraft, ReplyMode, ToolCallCheck, ToolCallRefused
from foureyes.pipeline import Runtime, SupportOutcome
from foureyes.review.deliberate import DeliberateResult, deliberate_tool, run_deliberate
from foureyes.review.projection import Mask, Projection, ProjectionSkipped, Window
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import SessionReview, project_session
from foureyes.review.session import Session
from foureyes.risk.result import TriageResult
from foureyes.store import Store
from foureyes.wire import (
    GATEWAY_MODEL,
    AssessBody,
    ChatCompletionRequest,
    CheckRequest,
    CheckStreamRequest,
    DraftBody,
    DraftTooLarge,
    InvalidRequest,
    ReviewBody,
    streamed_draft,
    support_message,
    triage_request,
)

__all__ = ["Draft", "Guard", "INVALID_INPUT", "Messages", "StoreChoice", "SyncGuard"]

INVALID_INPUT = "invalid_input"
"""The ``reason`` of the :class:`ContractError` a call raises on bad input."""

StoreChoice = Literal["memory"] | str | os.PathLike[str] | None
"""Where a guard keeps its records: ``None`` for the config's store (``./foureyes.db``
by default), ``"memory"`` for nothing kept after close, a path for an SQLite file, or a
database URL."""
Messages = Sequence[Mapping[str, Any]]
"""OpenAI chat-format messages (``{"role": ..., "content": ...}``); the last is the user's."""
Draft = str | Mapping[str, Any]
"""A draft: its text, or an assistant message's ``content`` and ``tool_calls``."""

_T = TypeVar("_T")
_P = ParamSpec("_P")
_Model = TypeVar("_Model", bound=BaseModel)


def _validate(model: type[_Model], call: str, body: dict[str, Any]) -> _Model:
    """``body`` as the gateway's request ``model``, or the typed error of the library."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        # In a user's words, as the server's 422 says it; the values given are not
        # echoed (a message's text is a user's).
        problems = [p.message(echo=False) for p in explain_errors(exc, model)]
        raise ContractError(call, INVALID_INPUT, "; ".join(problems)) from None


class _CrisisOptions(BaseModel):
    """The arguments of :meth:`Guard.crisis_reply`, checked as a request's are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    locale: Locale
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    mode: Literal["support", "guard"]


def _dicts(call: str, field: str, items: object) -> list[dict[str, Any]]:
    """``items`` as a list of JSON objects (messages, turns, sources, tools)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise ContractError(call, INVALID_INPUT, f"{field}: a list of objects is expected")
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ContractError(call, INVALID_INPUT, f"{field}.{index}: an object is expected")
    return [dict(item) for item in items]


def _refused(call: str, exc: InvalidRequest) -> ContractError:
    return ContractError(call, INVALID_INPUT, exc.detail)


def _options(
    call: str,
    conversation_id: str | None,
    region: str | None,
    locale: str | None,
    sources: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The request's ``foureyes`` object, left out when no option is given."""
    given: dict[str, Any] = {
        "conversation_id": conversation_id,
        "region": region,
        "locale": locale,
    }
    options = {k: v for k, v in given.items() if v is not None}
    if listed := _dicts(call, "sources", sources):
        options["sources"] = listed
    return options or None


def _draft_body(draft: Draft) -> dict[str, Any]:
    if isinstance(draft, str):
        return {"content": draft}
    if not isinstance(draft, Mapping):
        raise ContractError("check", INVALID_INPUT, "draft: a text or an object is expected")
    body = dict(draft)
    if body.get("role") == "assistant":  # a whole assistant message
        del body["role"]
    return body


def _store_url(choice: StoreChoice, scratch: str | None) -> str | None:
    if scratch is not None:
        return f"sqlite+aiosqlite:///{Path(scratch) / 'foureyes.db'}"
    if choice is None:
        return None
    text = os.fspath(choice)
    return text if "://" in text else f"sqlite+aiosqlite:///{Path(text)}"


class Guard:
    """foureyes in-process: checks, replies, triage and masked reviews on one runtime.

    Open one with :meth:`open` (an async context manager) or :meth:`start` (close it
    with :meth:`aclose`); one guard serves any number of concurrent calls.
    """

    def __init__(self, runtime: Runtime, *, scratch: str | None = None) -> None:
        """Wrap an open ``runtime`` (``scratch``: a folder to delete on close)."""
        self._runtime = runtime
        self._scratch = scratch
        self._closed = False

    @classmethod
    async def start(
        cls,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        store: StoreChoice = None,
        environ: Mapping[str, str] | None = None,
    ) -> Guard:
        """Open a guard; the caller closes it with :meth:`aclose`.

        Args:
            config: a :class:`~foureyes.config.Config`, or a TOML file to load; ``None``
                loads what ``foureyes serve`` would (``FOUREYES_CONFIG``, ``FOUREYES_*``
                variables), which with nothing set is the offline routes.
            store: ``None``: the config's store (an SQLite file ``foureyes.db`` in the
                working directory by default); ``"memory"``: nothing outlives the guard
                (an SQLite file in a private temporary folder, deleted on close: the
                store's reader and writer threads share one database, which SQLite's
                ``:memory:`` cannot do); a path: that SQLite file; a URL: that database.
            environ: where secret variables are read (``os.environ`` by default).

        Raises:
            ConfigError: the config cannot be loaded or built (see :meth:`Runtime.open`).
            StoreError: the store cannot be opened or migrated.
        """
        env = os.environ if environ is None else environ
        loaded = (
            config
            if isinstance(config, Config)
            else load_config(None if config is None else Path(config), environ=env)
        )
        scratch = tempfile.mkdtemp(prefix="foureyes-guard-") if store == "memory" else None
        try:
            url = _store_url(store, scratch)
            if url is not None:
                loaded = loaded.model_copy(
                    update={"store": loaded.store.model_copy(update={"url": url})}
                )
            runtime = await Runtime.open(loaded, env)
        except BaseException:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        return cls(runtime, scratch=scratch)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        store: StoreChoice = None,
        environ: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Guard]:
        """``async with Guard.open(...) as guard:``, closed on exit (arguments: :meth:`start`)."""
        guard = await cls.start(config, store=store, environ=environ)
        try:
            yield guard
        finally:
            await guard.aclose()

    @property
    def config(self) -> Config:
        """The effective configuration."""
        return self._runtime.config

    @property
    def store(self) -> Store:
        """The open store: read the recorded runs with ``guard.store.traces``.

        Raises:
            UsageError: the guard is closed.
        """
        return self._live().store

    def _live(self) -> Runtime:
        if self._closed:
            raise UsageError("this Guard is closed; open another")
        return self._runtime

    async def check(
        self,
        messages: Messages,
        draft: Draft,
        *,
        user: str | None = None,
        conversation_id: str | None = None,
        region: str | None = None,
        locale: str | None = None,
        sources: Sequence[Mapping[str, Any]] = (),
    ) -> SupportOutcome:
        """Triage the last user message and judge your own ``draft``, as ``POST /v1/check``.

        Args:
            messages: the conversation so far (OpenAI format); the last is the user's.
            draft: the reply your app would send: its text, or ``{"content": ...,
                "tool_calls": [...]}`` (OpenAI's assistant-message fields).
            user: the end user; names the conversation when ``conversation_id`` does not.
            conversation_id: the conversation (open unknowns, daily limits, trend).
            region: the user's region (ISO 3166-1 alpha-2), for crisis resources.
            locale: ``en``, ``zh-Hans`` or ``zh-Hant``: the language of code-rendered text.
            sources: ``{"id", "text", "origin"?}`` material the draft relies on.

        Returns:
            The outcome: ``text`` is what to deliver (the draft as released, with the
            resources a restricted policy requires, or the fallback); ``tool_calls`` are
            the draft's only when released.

        Raises:
            ContractError: bad input (nothing runs, nothing is recorded).
            StoreError: the run could not be recorded; deliver nothing.
            UsageError: the guard is closed.
        """
        runtime = self._live()
        body = {
            "messages": _dicts("check", "messages", messages),
            "draft": _draft_body(draft),
            "user": user,
            "foureyes": _options("check", conversation_id, region, locale, sources),
        }
        request = _validate(CheckRequest, "check", body)
        try:
            message = support_message(request, tenant=LOCAL_TENANT, tool_turns=True)
            given = request.given_draft()
        except InvalidRequest as exc:
            raise _refused("check", exc) from None
        return await runtime.pipeline.check(message, given)

    def check_tool_calls(self, tool_calls: Sequence[Mapping[str, Any]]) -> ToolCallCheck:
        """Whether the gate's rules let these tool calls through, before any model sees them.

        The rules checked in code on a candidate of these calls and no text, as the gate
        checks a draft: ``[gate] tools_allow`` / ``tools_deny`` by name (reason
        ``tool_not_allowed``), then any rule plugin that reads tool calls (reason
        ``rule_violation``). No model is called and nothing is recorded, so an allowed
        call is not an approval: a draft with it still goes through :meth:`check`.

        Args:
            tool_calls: OpenAI's assistant-message ``tool_calls`` (``{"id", "type":
                "function", "function": {"name", "arguments"}}``, arguments a JSON
                string), as for a draft of :meth:`check`.

        Raises:
            ContractError: bad input (no call, a malformed call, arguments that are not
                strict JSON, a repeated id); ``detail`` starts with ``tool_calls``.
            UsageError: the guard is closed.
        """
        gate = self._live().pipeline.gate
        calls = _dicts("check_tool_calls", "tool_calls", tool_calls)
        if not calls:
            raise ContractError("check_tool_calls", INVALID_INPUT, "tool_calls: none given")
        body = _validate(DraftBody, "check_tool_calls", {"tool_calls": calls})
        try:
            given = GivenDraft.of_openai(None, [c.model_dump() for c in body.tool_calls])
        except ToolCallRefused as exc:
            where = f"tool_calls.{exc.index}: {exc.problem.value}"
            raise ContractError("check_tool_calls", INVALID_INPUT, where) from None
        return gate.check_tool_calls(given.tool_calls)

    def crisis_reply(
        self,
        locale: str,
        region: str | None = None,
        *,
        mode: Literal["support", "guard"] = "guard",
    ) -> CrisisReply:
        """The code-rendered crisis reply, as a prohibited :meth:`check` delivers it.

        For a host that must show it without a check: an input guardrail that tripped on
        :meth:`triage` (``policy`` ``prohibited``). The wording is ``mode``'s (``guard``,
        that of :meth:`check`, by default; the team's where ``[gate] texts_file`` gives
        it), then the resources rendered by code from the verified registry, also given
        as entries. No model is called and nothing is recorded.

        Args:
            locale: ``en``, ``zh-Hans`` or ``zh-Hant`` (a triage's ``locale``).
            region: the user's region (ISO 3166-1 alpha-2); ``gate.region`` when unset.
            mode: ``guard`` or ``support`` (the wording of :meth:`reply`).

        Raises:
            ContractError: an unknown locale, region or mode.
            UsageError: the guard is closed.
        """
        gate = self._live().pipeline.gate
        body = _validate(
            _CrisisOptions, "crisis_reply", {"locale": locale, "region": region, "mode": mode}
        )
        return gate.crisis_reply(body.locale, body.region, mode=ReplyMode(body.mode))

    async def check_stream(
        self,
        messages: Messages,
        chunks: AsyncIterable[object],
        *,
        user: str | None = None,
        conversation_id: str | None = None,
        region: str | None = None,
        locale: str | None = None,
        sources: Sequence[Mapping[str, Any]] = (),
    ) -> SupportOutcome:
        """Judge the draft your model streams in, as ``POST /v1/check/stream``.

        ``chunks`` are your model's stream: OpenAI ``chat.completion.chunk`` objects, as
        dicts or the ``openai`` SDK's ``ChatCompletionChunk``. They are assembled as the
        endpoint assembles them (text and tool-call deltas joined as the SDK joins them),
        then judged as :meth:`check` judges the whole draft. A stream cut off (no
        ``finish_reason``, or ``length`` / ``content_filter``) or with a chunk that is no
        chunk falls back with ``draft_failed``; the outcome's text is then the fallback.
        Other arguments as for :meth:`check`.

        Raises:
            ContractError: bad ``messages`` or options, or a draft longer than
                ``server.max_body_bytes`` characters (nothing is recorded).
            StoreError: the run could not be recorded; deliver nothing.
            UsageError: the guard is closed.
        """
        runtime = self._live()
        body = {
            "messages": _dicts("check_stream", "messages", messages),
            "user": user,
            "foureyes": _options("check_stream", conversation_id, region, locale, sources),
        }
        request = _validate(CheckStreamRequest, "check_stream", body)
        limit = runtime.config.server.max_body_bytes
        try:
            message = support_message(request, tenant=LOCAL_TENANT, tool_turns=True)
            given = await streamed_draft(chunks, max_chars=limit)
        except InvalidRequest as exc:
            raise _refused("check_stream", exc) from None
        except DraftTooLarge as exc:
            raise ContractError("check_stream", INVALID_INPUT, f"chunks: {exc}") from None
        return await runtime.pipeline.check(message, given)

    async def reply(
        self,
        messages: Messages,
        *,
        user: str | None = None,
        conversation_id: str | None = None,
        region: str | None = None,
        locale: str | None = None,
        sources: Sequence[Mapping[str, Any]] = (),
    ) -> SupportOutcome:
        """Answer the last user message through triage and the gate (support mode).

        The Counselor drafts, the Supervisor reviews, the gate decides: what ``POST
        /v1/chat/completions`` answers. Arguments as for :meth:`check`.

        Raises:
            ContractError: bad input (nothing runs, nothing is recorded).
            StoreError: the run could not be recorded; deliver nothing.
            UsageError: the guard is closed.
        """
        runtime = self._live()
        body = {
            "model": GATEWAY_MODEL,
            "messages": _dicts("reply", "messages", messages),
            "user": user,
            "foureyes": _options("reply", conversation_id, region, locale, sources),
        }
        request = _validate(ChatCompletionRequest, "reply", body)
        try:
            message = support_message(request, tenant=LOCAL_TENANT, tool_turns=False)
        except InvalidRequest as exc:
            raise _refused("reply", exc) from None
        return await runtime.pipeline.handle(message)

    async def triage(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Messages = (),
        purpose: Literal["live", "test"] = "live",
    ) -> TriageResult:
        """Triage one text, as ``POST /v1/assess``; no reply is drafted or judged.

        Args:
            text: the user's message.
            conversation_id: its conversation (single flight, daily L1 limit, trend); a
                fresh one when unset.
            history: earlier ``{"role": "user" | "assistant", "text": ...}`` turns.
            purpose: ``test`` triages are kept apart from live ones and never alert.

        Raises:
            ContractError: bad input.
            StoreError: the triage could not be recorded.
            UsageError: the guard is closed.
        """
        runtime = self._live()
        body = {
            "text": text,
            "conversation_id": conversation_id,
            "history": _dicts("triage", "history", history),
            "purpose": purpose,
        }
        request = _validate(AssessBody, "triage", body)
        return await runtime.pipeline.triage.assess(triage_request(request, tenant=LOCAL_TENANT))

    def _session(
        self,
        call: str,
        session: Session | Messages,
        window: Window | str,
        mask: Mask | str,
        tools: Sequence[Mapping[str, Any]],
    ) -> tuple[Session, Window, Mask]:
        try:
            chosen = window if isinstance(window, Window) else Window.parse(window)
            masked = Mask(mask)
        except ValueError as exc:
            raise ContractError(call, INVALID_INPUT, f"window or mask: {exc}") from None
        return _parse_session(call, session, tools), chosen, masked

    def project(
        self,
        session: Session | Messages,
        *,
        window: Window | str = "recent:3",
        mask: Mask | str = Mask.REASONING_ONLY,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> Projection | ProjectionSkipped:
        """What a masked review of ``session`` would show the reviewer; no model call.

        Args:
            session: a :class:`~foureyes.review.session.Session`, or OpenAI chat-format
                messages (with ``reasoning_content``, ``tool_calls``, ``tool`` messages).
            window: ``recent:K``, ``since-last-mutation``, ``current-turn`` or
                ``all-turns`` (or a :class:`Window`).
            mask: what the reviewer does not see (``reasoning-only`` by default).
            tools: the primary's tool definitions, with ``messages``.

        Raises:
            ContractError: bad window or mask; SessionFormatError: not a session.
            UsageError: the guard is closed.
        """
        reviewer = self._live().reviewer
        parsed, chosen, masked = self._session("project", session, window, mask, tools)
        return project_session(
            parsed, chosen, masked, reviewer.config, images=reviewer.runner.accepts_images
        )

    async def review(
        self,
        session: Session | Messages,
        *,
        window: Window | str = "recent:3",
        mask: Mask | str = Mask.REASONING_ONLY,
        tools: Sequence[Mapping[str, Any]] = (),
        mode: RequestMode = RequestMode.CACHE_ALIGNED,
        session_id: str | None = None,
    ) -> SessionReview:
        """Review ``session`` through ``window`` and ``mask``, one reviewer call at most.

        As ``POST /v1/review``; arguments as for :meth:`project`, plus the request
        ``mode`` and the caller's ``session_id`` (recorded in the trace).

        Raises:
            ContractError: bad window or mask; SessionFormatError: not a session.
            StoreError: the review could not be recorded.
            UsageError: the guard is closed.
        """
        reviewer = self._live().reviewer
        parsed, chosen, masked = self._session("review", session, window, mask, tools)
        return await reviewer.review(
            parsed, window=chosen, mask=masked, mode=mode, session_id=session_id
        )

    @staticmethod
    def deliberate_tool() -> dict[str, Any]:
        """The OpenAI ``tools`` entry of the ``deliberate`` tool, to add to an agent's tools.

        See :mod:`foureyes.review.deliberate` for its arguments and its result text.
        """
        return deliberate_tool()

    async def deliberate(
        self,
        session: Session | Messages,
        arguments: str,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        session_id: str | None = None,
    ) -> DeliberateResult:
        """Carry out the agent's ``deliberate`` call on its session; one reviewer call at most.

        Args:
            session: the agent's session as it stands at the call (a
                :class:`~foureyes.review.session.Session`, or OpenAI chat-format messages
                ending with the assistant message that calls ``deliberate``).
            arguments: the call's raw ``arguments`` string, as the model wrote it.
            tools: the agent's tool definitions, with ``messages``.
            session_id: the host's id of the session (trace, checkpoint latch).

        Returns:
            The result; its ``text`` is the tool result to give the agent. Bad arguments,
            a skipped projection and a review without a packet are results with a reason
            code, never exceptions.

        Raises:
            ContractError: ``session`` or ``tools`` is not valid input;
                SessionFormatError: not a session.
            StoreError: the review could not be recorded.
            UsageError: the guard is closed.
        """
        reviewer = self._live().reviewer
        parsed = _parse_session("deliberate", session, tools)
        return await run_deliberate(reviewer, parsed, arguments, session_id=session_id)

    async def aclose(self) -> None:
        """Close the routes and the store (and delete a ``"memory"`` store); twice is harmless."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._runtime.aclose()
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)


def _parse_session(
    call: str, session: Session | Messages, tools: Sequence[Mapping[str, Any]]
) -> Session:
    if isinstance(session, Session):
        return session
    body = {"messages": _dicts(call, "session", session), "tools": _dicts(call, "tools", tools)}
    # The JSON endpoint's reading of a session: the same importer, the same errors.
    return _validate(ReviewBody, call, body).session()


def _blocking(
    method: Callable[Concatenate[Guard, _P], Awaitable[_T]],
) -> Callable[Concatenate[SyncGuard, _P], _T]:
    """``method`` of :class:`Guard`, run to completion on a :class:`SyncGuard`'s loop."""

    def call(self: SyncGuard, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return self._run(lambda guard: method(guard, *args, **kwargs))

    call.__name__ = method.__name__
    call.__qualname__ = f"SyncGuard.{method.__name__}"
    call.__doc__ = method.__doc__
    return call


class SyncGuard:
    """A blocking :class:`Guard` for scripts: ``with SyncGuard.open() as guard:``.

    Its calls run on an event loop of its own, in a thread of its own, so it can be used
    whether or not the calling thread runs a loop. In a running loop (a notebook, an
    async handler) a call blocks that loop until it is done: use :class:`Guard` there.
    The methods are :class:`Guard`'s, with the same arguments and results.
    """

    def __init__(
        self,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        store: StoreChoice = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Start the loop's thread and open the guard (arguments: :meth:`Guard.start`)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="foureyes-sync-guard", daemon=True
        )
        self._thread.start()
        self._closed = False
        try:
            self._guard = self._submit(Guard.start(config, store=store, environ=environ))
        except BaseException:
            self._stop()
            raise

    @classmethod
    def open(
        cls,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        store: StoreChoice = None,
        environ: Mapping[str, str] | None = None,
    ) -> SyncGuard:
        """``with SyncGuard.open(...) as guard:``, closed on exit (see :meth:`Guard.start`)."""
        return cls(config, store=store, environ=environ)

    def _submit(self, work: Coroutine[Any, Any, _T]) -> _T:
        if threading.current_thread() is self._thread:
            work.close()
            raise UsageError("a SyncGuard cannot be called from its own loop; await a Guard")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _run(self, method: Callable[[Guard], Awaitable[_T]]) -> _T:
        if self._closed:
            raise UsageError("this SyncGuard is closed; open another")

        async def run() -> _T:
            return await method(self._guard)

        return self._submit(run())

    check = _blocking(Guard.check)
    reply = _blocking(Guard.reply)
    triage = _blocking(Guard.triage)
    review = _blocking(Guard.review)
    deliberate = _blocking(Guard.deliberate)
    deliberate_tool = staticmethod(deliberate_tool)

    def project(
        self,
        session: Session | Messages,
        *,
        window: Window | str = "recent:3",
        mask: Mask | str = Mask.REASONING_ONLY,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> Projection | ProjectionSkipped:
        """:meth:`Guard.project` (no model call, so nothing runs on the loop)."""
        if self._closed:
            raise UsageError("this SyncGuard is closed; open another")
        return self._guard.project(session, window=window, mask=mask, tools=tools)

    def check_tool_calls(self, tool_calls: Sequence[Mapping[str, Any]]) -> ToolCallCheck:
        """:meth:`Guard.check_tool_calls` (pure, so nothing runs on the loop)."""
        if self._closed:
            raise UsageError("this SyncGuard is closed; open another")
        return self._guard.check_tool_calls(tool_calls)

    def crisis_reply(
        self,
        locale: str,
        region: str | None = None,
        *,
        mode: Literal["support", "guard"] = "guard",
    ) -> CrisisReply:
        """:meth:`Guard.crisis_reply` (pure, so nothing runs on the loop)."""
        if self._closed:
            raise UsageError("this SyncGuard is closed; open another")
        return self._guard.crisis_reply(locale, region, mode=mode)

    @property
    def store(self) -> Store:
        """:attr:`Guard.store` (its methods are coroutines of the guard's loop)."""
        if self._closed:
            raise UsageError("this SyncGuard is closed; open another")
        return self._guard.store

    def close(self) -> None:
        """Close the guard and stop its loop; twice is harmless."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._guard.aclose())
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> SyncGuard:
        """The guard itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close it."""
        self.close()
