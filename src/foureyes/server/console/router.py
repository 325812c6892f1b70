"""The ``/console`` routes: the page and its two static files, under a strict CSP.

The page and its assets hold no data and need no key: a browser cannot send a bearer
token when it navigates. Everything the console shows comes from the gateway's own
endpoints (``/v1/chat/completions``, ``/v1/traces``), called by the script with the
admin key the user typed into the page (kept in the tab's ``sessionStorage``, sent as
``Authorization: Bearer``, never in a URL), or with no key in ``open_loopback`` mode.

The page's language is ``?lang=`` when it names one of ours (``en``, ``zh-Hans``,
``zh-Hant``), otherwise the ``Accept-Language`` header's choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from foureyes.config import Config
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.gate.rules import RuleCatalogue
from foureyes.risk.resources import ResourceRegistry
from foureyes.server.console.catalogue import Catalogue, console_strings
from foureyes.server.console.page import PageAssets, render_page
from foureyes.server.errors import ApiError, ErrorCode, locale_from_accept_language

__all__ = ["CONSOLE_CSP", "CONSOLE_PATH", "console_router", "page_locale"]

CONSOLE_PATH = "/console"
"""Where the console is mounted."""

CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every console response: scripts and styles from this
origin only (no inline script, no inline style attribute), requests to this origin only,
no framing. Model text reaching the DOM as markup could therefore run nothing even if the
script's own escaping failed."""

_SECURITY_HEADERS = {
    "content-security-policy": CONSOLE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
_ASSET_TYPES = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    media_type: str
    version: str


def page_locale(lang: str | None, accept_language: str | None) -> Locale:
    """The page's locale: ``lang`` when it is one of ours (any case), else the header's."""
    if lang:
        for locale in Locale:
            if locale.value.lower() == lang.strip().lower():
                return locale
    return locale_from_accept_language(accept_language)


def console_router(*, model: str, catalogue: Catalogue | None = None) -> APIRouter:
    """The console's routes, to mount on the app (``app.include_router``).

    Args:
        model: the model id the chat pane asks ``/v1/chat/completions`` for.
        catalogue: the UI strings (the packaged catalogue by default).

    Raises:
        UsageError: the packaged catalogue is broken (a bug in this release).
    """
    strings = catalogue or console_strings()
    assets = _load_assets()
    page_assets = PageAssets(
        css_href=f"{CONSOLE_PATH}/static/console.css?v={assets['console.css'].version}",
        js_href=f"{CONSOLE_PATH}/static/console.js?v={assets['console.js'].version}",
        console_path=CONSOLE_PATH,
    )
    router = APIRouter(prefix=CONSOLE_PATH, tags=["console"], include_in_schema=False)

    @router.get("", response_class=HTMLResponse, name="console")
    @router.get("/", response_class=HTMLResponse, name="console_slash")
    async def page(request: Request, lang: str | None = None) -> HTMLResponse:
        """The console page, in the language asked for."""
        locale = page_locale(lang, request.headers.get("accept-language"))
        service = request.app.state.service
        config: Config = service.config
        registry: ResourceRegistry = service.pipeline.registry
        body = render_page(
            strings,
            locale,
            model=model,
            rules=_rule_texts(config, locale),
            assets=page_assets,
            regions=[(code, registry.regions[code][locale]) for code in registry.served_regions()],
            default_region=config.gate.region,
        )
        headers = _SECURITY_HEADERS | {"cache-control": "no-store", "vary": "Accept-Language"}
        return HTMLResponse(body, headers=headers)

    @router.get("/static/{name}", name="console_static")
    async def static(name: str) -> Response:
        """The console's stylesheet or script."""
        asset = assets.get(name)
        if asset is None:
            raise ApiError(ErrorCode.NOT_FOUND)
        headers = _SECURITY_HEADERS | {"cache-control": "no-cache", "etag": f'"{asset.version}"'}
        return Response(asset.body, media_type=asset.media_type, headers=headers)

    return router


def _rule_texts(config: Config, locale: Locale) -> dict[str, str]:
    """Every rule id of this deployment with its description in ``locale``."""
    rules = RuleCatalogue.from_config(config.gate).rules
    return {rule.id: rule.description.get(locale, rule.id) for rule in rules}


def _load_assets() -> Mapping[str, _Asset]:
    folder = resources.files(__package__ or __name__).joinpath("static")
    loaded = {}
    for name, media_type in _ASSET_TYPES.items():
        body = folder.joinpath(name).read_bytes()
        loaded[name] = _Asset(body, media_type, sha256_hex(body)[:16])
    return MappingProxyType(loaded)
