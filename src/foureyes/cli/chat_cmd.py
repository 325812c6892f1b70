"""``foureyes chat``: the support pipeline in the terminal, one line of stdin per message.

Each reply is followed by its decision line: released or fallback and the reason, the
triage's tier, level and status, the policy applied, the candidate's and the delivered
text's digests (short) and the trace id, for ``foureyes trace show``. ``--json`` prints
one JSON object per message instead: the reply and the gateway's ``foureyes`` object.

A line that starts with ``/`` is a command, handled here and never sent: ``/help`` lists
the commands, ``/quit`` ends the chat, any other is refused as unknown. A message that
starts with ``/`` is written with two (``//etc`` sends ``/etc``). A help line saying so
opens an interactive chat.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator
from typing import Annotated, Any

import typer

from foureyes.cli._common import ConfigOption, JsonOption, console, fail, load, run
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.gate import Turn
from foureyes.llm.routes import Routes
from foureyes.pipeline import SupportMessage, SupportOutcome, SupportPipeline
from foureyes.store import Store

__all__ = ["COMMANDS", "HELP_LINE", "chat", "decision_line", "open_pipeline"]

_SHORT = 12
COMMANDS = {
    "/help": "list these commands",
    "/quit": "end the chat (as does end of input)",
}
"""The chat's own commands: handled locally, never sent as a message."""
HELP_LINE = (
    "Type a message and press Enter; /help lists the commands, /quit ends the chat"
    " (a message that starts with / is written with //)."
)
"""The line that opens a chat in the terminal."""


@contextlib.asynccontextmanager
async def open_pipeline(cfg: Config) -> AsyncIterator[SupportPipeline]:
    """A support pipeline over the configured store and routes, closed when the block ends.

    Raises:
        ConfigError: a route cannot be built, a secret is missing, or the store URL is
            unusable.
        StoreError: the store cannot be opened.
    """
    cfg.require_secrets(os.environ)
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    try:
        routes = Routes.build(cfg, os.environ)
        try:
            pipeline = SupportPipeline(
                cfg, routes, store, alerts=SupportPipeline.alerts_for(cfg, store)
            )
            try:
                yield pipeline
            finally:
                await pipeline.aclose()
        finally:
            await routes.aclose()
    finally:
        await store.close()


def _short(digest: str | None) -> str:
    return "-" if digest is None else digest[:_SHORT]


def decision_line(outcome: SupportOutcome) -> str:
    """The one line shown under a reply."""
    risk = outcome.triage
    floor = f" (floor: {outcome.policy.floor.value})" if outcome.policy.floor else ""
    return (
        f"{outcome.decision.value} {outcome.reason.value} | "
        f"risk {risk.tier.value} {risk.level.value if risk.level else '-'} {risk.status.value}"
        f"{' confirmed' if risk.confirmed else ''} | policy {outcome.policy.policy.value}{floor} | "
        f"candidate {_short(outcome.candidate_sha256)} delivered {_short(outcome.delivered_sha256)}"
        f" | trace {outcome.trace_id}"
    )


def _document(outcome: SupportOutcome) -> dict[str, Any]:
    return {
        "ok": True,
        "reply": outcome.text,
        "foureyes": outcome.response_block(),
        "timings": outcome.timings.as_json(),
    }


def _command(text: str, *, as_json: bool) -> bool:
    """Handle a command line locally; ``False`` when it ends the chat."""
    name = text.split(maxsplit=1)[0]
    if name == "/quit":
        return False
    if as_json:
        if name == "/help":
            typer.echo(json.dumps({"ok": True, "commands": COMMANDS}, sort_keys=True))
        else:
            problem = f"unknown command {name}; /help lists the commands"
            document = {"ok": False, "error": "UnknownCommand", "problems": [problem]}
            typer.echo(json.dumps(document, ensure_ascii=False, sort_keys=True))
        return True
    if name == "/help":
        for command, meaning in COMMANDS.items():
            console.print(f"  {command}  {meaning}", markup=False, highlight=False)
        console.print("  //text  send a message that starts with /", markup=False)
    else:
        console.print(
            f"unknown command {name} (not sent); /help lists the commands",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return True


async def _chat(cfg: Config, conversation_id: str, *, as_json: bool) -> None:
    history: list[Turn] = []
    prompt = not as_json and sys.stdin.isatty()
    async with open_pipeline(cfg) as pipeline:
        if not as_json:
            console.print(HELP_LINE, style="dim", markup=False, highlight=False, soft_wrap=True)
        while True:
            if prompt:
                console.print("[bold]>[/] ", end="")
            line = sys.stdin.readline()
            if not line:
                return
            text = line.rstrip("\n")
            if not text.strip():
                continue
            if text.startswith("/") and not text.startswith("//"):
                if _command(text, as_json=as_json):
                    continue
                return
            text = text.removeprefix("/")  # "//etc" is the message "/etc"
            outcome = await pipeline.handle(
                SupportMessage(text=text, history=tuple(history), conversation_id=conversation_id)
            )
            history += [Turn(role="user", text=text), Turn(role="assistant", text=outcome.text)]
            if as_json:
                typer.echo(json.dumps(_document(outcome), ensure_ascii=False, sort_keys=True))
                continue
            # Text, not markup: the reply may hold model-written brackets.
            console.print(outcome.text, markup=False, highlight=False, soft_wrap=True)
            style = "green" if outcome.decision.value == "released" else "yellow"
            line = decision_line(outcome)
            console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)


def chat(
    config: ConfigOption = None,
    conversation_id: Annotated[
        str | None,
        typer.Option("--conversation-id", help="The conversation (default: a new one)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Talk to the support pipeline: each line of stdin is a message.

    Every message is triaged and every reply passes the release gate, as in the
    gateway; a decision line follows each reply. A line that starts with / is a
    command, never sent: /help lists them, /quit ends the chat; // sends a message that
    starts with /. Exits 1 when the config is invalid or
    the store cannot be opened or written (nothing is shown that was not recorded).
    """
    cfg = load(config, as_json=as_json)
    conversation = conversation_id or f"cli:{secrets.token_hex(8)}"
    if not 1 <= len(conversation) <= 256:
        raise typer.BadParameter("a conversation id has 1 to 256 characters")
    try:
        run(_chat(cfg, conversation, as_json=as_json))
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
