"""The console page: one server-rendered HTML document, with no inline script or style.

The template (``templates/console.html``) holds two kinds of placeholders:
``{{t:KEY}}`` is the catalogue string ``KEY`` in the page's locale, HTML-escaped; a bare
``{{name}}`` is a slot this module fills with markup it built itself, escaping every value
it puts in. The page's data for the script (its locale, strings, the gateway's model id,
the rule descriptions) travels in a ``<script type="application/json">`` block, which the
browser never executes, escaped so no text can end the block early.

The chat's region menu lists the regions the deployment's crisis-resource registry serves
(:meth:`~foureyes.risk.resources.ResourceRegistry.served_regions`), each by its name in
the page's locale, after a first choice that sends no region (the service's ``gate.region``
then applies, or none).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.server.console.catalogue import Catalogue
from foureyes.store.trace_list import RUN_PURPOSES

__all__ = ["LEVEL_FILTERS", "PURPOSE_FILTERS", "PageAssets", "json_for_script", "render_page"]

LEVEL_FILTERS = ("low", "medium", "high", "critical", "unknown", "unscreened")
"""Values of the trace list's risk filter: the four levels, and ``unknown`` (no level)."""
PURPOSE_FILTERS = RUN_PURPOSES
"""Values of the trace list's purpose filter (chat, the default, apart from eval runs)."""

_ENDONYMS = {Locale.EN: "English", Locale.ZH_HANS: "简体中文", Locale.ZH_HANT: "繁體中文"}
_PLACEHOLDER = re.compile(r"\{\{(t:)?([A-Za-z0-9_.-]+)\}\}")
# Characters that could end a <script> block or open a comment inside one, as JSON escapes.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


@dataclass(frozen=True, slots=True)
class PageAssets:
    """Where the page loads its stylesheet and script from."""

    css_href: str
    """URL of the stylesheet (versioned by content)."""
    js_href: str
    """URL of the script (versioned by content)."""
    console_path: str
    """The page's own path, the target of the language form."""


def json_for_script(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script type="application/json">`` block.

    ``<``, ``>`` and ``&`` are written as JSON unicode escapes, so no string can close the
    block (``</script>``) or open markup; ``JSON.parse`` reads the same value back.
    """
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    return "".join(_SCRIPT_UNSAFE.get(ch, ch) for ch in text)


def render_page(
    catalogue: Catalogue,
    locale: Locale,
    *,
    model: str,
    rules: Mapping[str, str],
    assets: PageAssets,
    regions: Sequence[tuple[str, str]] = (),
    default_region: str | None = None,
) -> str:
    """The console page in ``locale``.

    Args:
        catalogue: the UI strings.
        locale: the page's language.
        model: the model id the chat pane sends to ``/v1/chat/completions``.
        rules: rule id to its description in ``locale`` (for the decision trail).
        assets: where the stylesheet and the script are served.
        regions: the regions the chat's region menu offers, as (code, name in
            ``locale``), in menu order: those the crisis-resource registry serves.
        default_region: the service's ``gate.region``, what a message naming no
            region gets; it labels the menu's first choice.

    Raises:
        UsageError: the template names a string or slot that does not exist.
    """

    def text(key: str) -> str:
        return catalogue.text(key, locale)

    strings = catalogue.strings(locale)
    data = {
        "lang": locale.value,
        "model": model,
        "rules": dict(rules),
        "strings": strings,
        "regions": [code for code, _ in regions],
    }
    names = dict(regions)
    if default_region is None:
        no_region = text("chat.region_none")
    else:
        # A configured region the registry serves no line of is named by its code alone.
        named = f"{names[default_region]} ({default_region})" if default_region in names else None
        no_region = f"{text('chat.region_default')}: {named or default_region}"
    any_value = ("", text("traces.any"))
    slots = {
        "lang": html.escape(locale.value),
        "css_href": html.escape(assets.css_href),
        "js_href": html.escape(assets.js_href),
        "console_path": html.escape(assets.console_path),
        "config_json": json_for_script(data),
        "lang_options": _options(((loc.value, _ENDONYMS[loc]) for loc in Locale), locale.value),
        "reason_options": _options(
            [
                any_value,
                *((r.value, f"{text(f'reasonname.{r.value}')} ({r.value})") for r in ReasonCode),
            ],
            "",
        ),
        "purpose_options": _options(
            [*((v, text(f"purpose.{v}")) for v in PURPOSE_FILTERS), any_value], "chat"
        ),
        "level_options": _options(
            [any_value, *((v, text(f"level.{v}")) for v in LEVEL_FILTERS)], ""
        ),
        "region_options": _options(
            [("", no_region), *((code, f"{name} ({code})") for code, name in regions)], ""
        ),
    }

    def fill(match: re.Match[str]) -> str:
        key = match.group(2)
        if match.group(1):
            return html.escape(text(key))
        if key not in slots:
            raise UsageError(f"console template names an unknown slot {key!r}")
        return slots[key]

    return _PLACEHOLDER.sub(fill, _template())


def _options(choices: Iterable[tuple[str, str]], selected: str) -> str:
    return "".join(
        f'<option value="{html.escape(value)}"{" selected" if value == selected else ""}>'
        f"{html.escape(label)}</option>"
        for value, label in choices
    )


@cache
def _template() -> str:
    folder = resources.files(__package__ or __name__).joinpath("templates")
    return folder.joinpath("console.html").read_text(encoding="utf-8")
