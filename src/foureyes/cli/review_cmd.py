"""``foureyes review``: a masked review of one agent session file (the manual trigger)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    emit_json,
    fail,
    load,
    print_table,
    run,
)
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.roles import Role
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.review.importers import SessionFormat, load_session
from foureyes.review.projection import Mask, ProjectionSkipped, Window
from foureyes.review.publication import PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview, project_session, projection_json
from foureyes.review.runner import ReviewRunner
from foureyes.review.session import Session, SessionFormatError
from foureyes.store import Store

__all__ = ["review"]


class _Format(StrEnum):
    AUTO = "auto"
    OPENAI = "openai"
    NATIVE = "native"
    SWE_AGENT = "swe-agent"
    OPENHANDS = "openhands"
    VCR = "vcr"


_FORMATS = {
    _Format.AUTO: None,
    _Format.OPENAI: SessionFormat.OPENAI_CHAT,
    _Format.NATIVE: SessionFormat.NATIVE,
    _Format.SWE_AGENT: SessionFormat.SWE_AGENT,
    _Format.OPENHANDS: SessionFormat.OPENHANDS,
    _Format.VCR: SessionFormat.VCR,
}


def _window(value: str) -> Window:
    try:
        return Window.parse(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def review(
    session_file: Annotated[
        Path,
        typer.Argument(
            help="The session: OpenAI chat JSON, native JSONL, SWE-agent .traj, OpenHands JSON"
            " or a VCR cassette (.yaml) of chat calls.",
            exists=True,
            dir_okay=False,
        ),
    ],
    window: Annotated[
        str,
        typer.Option(
            help="recent:K (the last K complete steps), since-last-mutation, current-turn"
            " or all-turns."
        ),
    ] = "recent:3",
    mask: Annotated[Mask, typer.Option(help="What the reviewer does not see.")] = (
        Mask.REASONING_ONLY
    ),
    mode: Annotated[RequestMode, typer.Option(help="How the review request is built.")] = (
        RequestMode.CACHE_ALIGNED
    ),
    format: Annotated[_Format, typer.Option("--format", help="Session format.")] = _Format.AUTO,
    project_only: Annotated[
        bool,
        typer.Option("--project-only", help="Print the projection and its metadata; no model."),
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Review SESSION_FILE as a reviewer that does not see the masked reasoning.

    Projects the session through --window and --mask, sends one request to the route of
    the reviewer role and checks its answer against the packet contract. Prints the
    projection's metadata, the request's prefix share, the outcome (an accepted packet,
    or none and why) and what would be published under review.publish. A skipped
    projection or a review without a packet is a result, not an error: exit status 1
    means the command itself failed (bad config, unreadable or malformed session, store
    down).
    """
    chosen = _window(window)
    cfg = load(config, as_json=as_json)
    try:
        session = load_session(session_file, _FORMATS[format])
    except OSError as exc:
        fail(ConfigError([f"cannot read {str(session_file)!r}: {exc}"]), as_json=as_json)
    except SessionFormatError as exc:
        fail(exc, as_json=as_json)
    facts = {"file": str(session_file), "events": len(session.events)}
    if project_only:
        _print_projection(session, chosen, mask, cfg, facts, as_json=as_json)
        return
    try:
        cfg.require_secrets(os.environ)
        result = run(_review(cfg, session, chosen, mask, mode))
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "session": facts, **result.as_json()})
    else:
        _show(result, facts)


@contextlib.asynccontextmanager
async def _open_reviewer(cfg: Config) -> AsyncIterator[Reviewer]:
    """A reviewer over the configured store and routes, closed when the block ends.

    Raises:
        ConfigError: a route cannot be built.
        StoreError: the store cannot be opened.
    """
    policy = PublicationPolicy(cfg.review.publish)
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    try:
        routes = Routes.build(cfg, os.environ)
        try:
            caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
            runner = ReviewRunner(caller, packet_max_chars=cfg.review.packet_max_chars)
            yield Reviewer(runner, cfg.review, policy=policy)
        finally:
            await routes.aclose()
    finally:
        await store.close()


async def _review(
    cfg: Config, session: Session, window: Window, mask: Mask, mode: RequestMode
) -> SessionReview:
    async with _open_reviewer(cfg) as reviewer:
        return await reviewer.review(session, window=window, mask=mask, mode=mode)


def _print_projection(
    session: Session,
    window: Window,
    mask: Mask,
    cfg: Config,
    facts: dict[str, Any],
    *,
    as_json: bool,
) -> None:
    _, route = cfg.route_for(Role.REVIEWER)
    projection = project_session(session, window, mask, cfg.review, images=route.images)
    if as_json:
        emit_json({"ok": True, "session": facts, **projection_json(projection)})
        return
    _meta_table(projection.meta.to_dict(), "projection")
    if isinstance(projection, ProjectionSkipped):
        console.print(f"[yellow]skipped[/]: {projection.reason.value} (nothing would be sent)")
        return
    console.print(f"prefix: {len(projection.prefix)} native message(s)")
    console.print(projection.snapshot_text, markup=False, highlight=False)


def _meta_table(values: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    table.add_column("field")
    table.add_column("value")
    for key, value in values.items():
        table.add_row(key, str(value))
    print_table(table)


def _show(result: SessionReview, facts: dict[str, Any]) -> None:
    console.print(f"session {facts['file']} ({facts['events']} events)", markup=False)
    _meta_table(result.meta.to_dict(), "projection")
    if result.skipped is not None:
        console.print(f"[yellow]skipped[/]: {result.skipped.reason.value}; no model was called")
        return
    assert result.request is not None and result.outcome is not None
    share = f"{result.request.prefix_share:.1%}"
    console.print(f"request: {result.request.mode.value}, prefix share {share}")
    outcome = result.outcome
    if outcome.packet is None:
        why = outcome.reason.value + (f" ({outcome.rejection.value})" if outcome.rejection else "")
        console.print(f"[red]no packet[/]: {why}", highlight=False)
    else:
        console.print(f"[green]packet accepted[/]: {outcome.packet.status.value}")
        items = Table()
        for column in ("kind", "certainty", "content"):
            items.add_column(column)
        for item in outcome.packet.items:
            items.add_row(item.kind.value, item.certainty.value, item.content)
        if outcome.packet.items:
            print_table(items)
        console.print(f"published: {'yes' if result.publication else 'no'}")
    console.print(f"trace: {outcome.trace_id}", highlight=False)
