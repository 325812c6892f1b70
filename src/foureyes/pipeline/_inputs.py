"""The ``[input]`` stage of a pipeline run: judge every input before anything is drafted.

:meth:`InputStage.prepare` is synchronous and runs first, before the run's header is
written: it scans the user's message, each ``source`` and each tool result with the
deterministic checks, masks personal data everywhere a model or the store would read
it (``[input] pii = "mask"``), and withholds the sources and tool results the findings
strip. What it returns, :class:`PreparedInput`, carries the message and the team's own
request as models may see them. With ``[input] model_check`` the ``input_checker`` is
asked meanwhile (:meth:`PreparedInput.start_model_check`, beside triage and the
speculative draft); :meth:`PreparedInput.decide` combines both into the
:class:`~foureyes.inputs.stage.InputDecision` the run follows and records.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from foureyes.config import Config, InputConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import detect_locale
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.gate.review_input import Source, Turn
from foureyes.inputs.check import InputCategory, InputScan
from foureyes.inputs.masking import Masked, mask
from foureyes.inputs.model_check import (
    CheckedText,
    ModelCheckError,
    ModelJudgement,
    run_model_check,
    topic_for,
)
from foureyes.inputs.registry import InputChecks
from foureyes.inputs.stage import (
    STRIPPED_MARKER,
    InputDecision,
    InputSite,
    JudgedInput,
    decide_input,
)
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatRequest
from foureyes.pipeline.outcome import SupportMessage

__all__ = ["InputStage", "PreparedInput"]

_MASKED_ROLES = frozenset({"user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class _Item:
    ref: str
    site: InputSite
    scan: InputScan
    seen: str
    """The text models see (masked when configured)."""
    seen_sha256: str
    """Its SHA-256: what the model check is shown and answers by."""

    def judged(self, model: ModelJudgement | ModelCheckError | None = None) -> JudgedInput:
        return JudgedInput(self.ref, self.site, self.scan, model, seen_sha256=self.seen_sha256)


@dataclass(slots=True)
class PreparedInput:
    """A request's inputs, judged by code, as models may see them."""

    config: InputConfig
    message: SupportMessage
    """The message as models and the store see it: masked, stripped by the findings."""
    own_request: ChatRequest | None
    """The team's own request (guard mode), masked and stripped the same way."""
    items: tuple[_Item, ...]
    masked: dict[str, dict[str, object]]
    """Per masked input's ref, its placeholders and spans (no values)."""
    deterministic: InputDecision
    """The decision on the deterministic scans alone."""
    _original: SupportMessage
    _original_request: ChatRequest | None
    _masks: dict[str, Masked]
    """Each masked text by its ref (the earlier turns' too, which are not judged inputs)."""
    _model: asyncio.Task[ModelJudgement | ModelCheckError] | None = field(default=None)
    _flagged_by: str | None = None

    def flag(self, flagged_by: str | None) -> None:
        """Apply the conversation's flag (:func:`~foureyes.inputs.stage.flagging_run`)."""
        self._flagged_by = flagged_by
        judged = [i.judged() for i in self.items]
        self.deterministic = decide_input(judged, self.config, flagged_by=flagged_by)

    @property
    def model_pending(self) -> bool:
        """Whether the model check was started (its verdict is part of the decision)."""
        return self._model is not None

    @property
    def blocks_now(self) -> bool:
        """Whether the deterministic checks alone block: nothing is to be drafted."""
        return self.deterministic.blocks

    def start_model_check(self, caller: ModelCaller, *, trace_id: str, deadline_s: float) -> None:
        """Ask the ``input_checker`` about the inputs models would see, in the background."""
        if not self.config.model_check or not self.items:
            return
        texts = [CheckedText(i.ref, i.site.value, i.seen, i.seen_sha256) for i in self.items]
        keep = self.config.history_turns
        turns = self.message.history[-keep:] if keep else ()
        history = [(t.role, t.text) for t in turns if t.role != "tool"]
        locale = self.message.locale or detect_locale(self.message.text)
        topic = topic_for(self.config.topic, locale)
        self._model = asyncio.ensure_future(
            run_model_check(
                caller,
                texts,
                history=history,
                topic=topic,
                trace_id=trace_id,
                deadline_s=deadline_s,
            )
        )

    async def decide(self) -> InputDecision:
        """The decision on every check's result (waits for the model check, if any)."""
        if self._model is None:
            return self.deterministic
        judgement = await self._model
        judged = [i.judged(judgement) for i in self.items]
        return decide_input(judged, self.config, flagged_by=self._flagged_by)

    async def cancel(self) -> None:
        """Stop a model check still running (the run ended another way)."""
        if self._model is not None and not self._model.done():
            self._model.cancel()
            await asyncio.gather(self._model, return_exceptions=True)

    def withheld(self, decision: InputDecision) -> tuple[SupportMessage, ChatRequest | None]:
        """The message and request with everything ``decision`` strips withheld."""
        stripped = decision.stripped
        if stripped <= self.deterministic.stripped:
            return self.message, self.own_request
        return _apply(self._original, self._original_request, decision, masks=self._masks)

    def event(self, decision: InputDecision) -> TraceEvent:
        """The stage's trace event: decision, digests, findings, masking; never a text."""
        data = decision.as_json()
        data["masked"] = self.masked
        return TraceEvent(EventKind.INPUT, "input", data)


class InputStage:
    """Builds each run's :class:`PreparedInput` (one instance per pipeline)."""

    def __init__(self, config: Config) -> None:
        """Use ``config.input`` and the registered checks.

        Raises:
            ConfigError: a check plugin or a team pattern is broken.
        """
        self.config = config.input
        self.checks = InputChecks.from_config(config.input)
        self._region = config.gate.region

    def prepare(
        self, message: SupportMessage, own_request: ChatRequest | None
    ) -> PreparedInput | None:
        """Scan, mask and strip ``message`` (and ``own_request``); ``None`` when off."""
        if not self.config.enabled:
            return None
        region = message.region or self._region
        items: list[_Item] = []
        masked: dict[str, dict[str, object]] = {}
        masks: dict[str, Masked] = {}
        want_mask = self.config.pii == "mask"

        def judge(ref: str, site: InputSite | None, text: str) -> None:
            result = self.checks.scan(text, region=region)
            seen = text
            if want_mask and InputCategory.PII in result.categories:
                done = mask(text, result.findings)
                masks[ref] = done
                masked[ref] = done.as_json()
                seen = done.text
            if site is not None:
                items.append(_Item(ref, site, result, seen, sha256_hex(seen)))

        judge("message", InputSite.MESSAGE, message.text)
        for source in message.sources:
            judge(f"source:{source.id}", InputSite.SOURCE, source.text)
        for index, turn in enumerate(message.history):
            if turn.role == "tool":
                judge(f"history.{index}", InputSite.TOOL_RESULT, turn.text)
            elif want_mask and turn.text:
                judge(f"history.{index}", None, turn.text)
        decision = decide_input([i.judged() for i in items], self.config)
        prepared = PreparedInput(
            config=self.config,
            message=message,
            own_request=own_request,
            items=tuple(items),
            masked=masked,
            deterministic=decision,
            _original=message,
            _original_request=own_request,
            _masks=masks,
        )
        prepared.message, prepared.own_request = _apply(message, own_request, decision, masks=masks)
        return prepared


def _apply(
    message: SupportMessage,
    own_request: ChatRequest | None,
    decision: InputDecision,
    *,
    masks: dict[str, Masked],
) -> tuple[SupportMessage, ChatRequest | None]:
    """``message`` and ``own_request`` as models see them: masked, then stripped."""
    # A text that is neither masked nor stripped is shown as it was written.
    seen = {ref: m.text for ref, m in masks.items()}
    stripped = decision.stripped
    # What the user and tools wrote, as it was, to what models may see instead.
    replace: dict[str, str] = {}

    def shown(ref: str, original: str, site: str) -> str:
        if ref in stripped:
            outcome = decision.outcome(ref)
            value = STRIPPED_MARKER.format(
                site=site.replace("_", " "),
                categories=", ".join(sorted(outcome.categories)) or "unjudgeable",
            )
        else:
            value = seen.get(ref, original)
        if value != original:
            replace[original] = value
        return value

    text = shown("message", message.text, "message")
    sources = tuple(
        Source(id=s.id, origin=s.origin, text=shown(f"source:{s.id}", s.text, "source"))
        for s in message.sources
    )
    history = tuple(
        Turn(
            role=t.role,
            text=shown(f"history.{index}", t.text, "tool result"),
            tool_calls=t.tool_calls,
        )
        for index, t in enumerate(message.history)
    )
    if not replace:
        return message, own_request
    updated = message.model_copy(update={"text": text, "sources": sources, "history": history})
    if own_request is None:
        return updated, None
    messages = tuple(
        m.model_copy(update={"content": replace[m.content]})
        if m.role in _MASKED_ROLES and isinstance(m.content, str) and m.content in replace
        else m
        for m in own_request.messages
    )
    subject = dict(own_request.subject)
    if "user_message" in subject:
        subject["user_message"] = text
    return updated, own_request.model_copy(update={"messages": messages, "subject": subject})
