"""The web console under ``/console``: chat with the pipeline, see why each reply went out.

:func:`console_router` serves one page and its stylesheet and script. The page talks to
the gateway's own endpoints (``/v1/chat/completions``, ``/v1/traces``) with an admin
key typed into it (or none in ``open_loopback`` mode), shows each reply's decision trail,
and lists the recorded traces with filters. Strings come from one catalogue in
``en``, ``zh-Hans`` and ``zh-Hant``; every response carries :data:`CONSOLE_CSP`.
"""

from foureyes.server.console.catalogue import Catalogue, console_strings
from foureyes.server.console.page import (
    LEVEL_FILTERS,
    PURPOSE_FILTERS,
    PageAssets,
    json_for_script,
    render_page,
)
from foureyes.server.console.router import CONSOLE_CSP, CONSOLE_PATH, console_router, page_locale

__all__ = [
    "CONSOLE_CSP",
    "CONSOLE_PATH",
    "Catalogue",
    "LEVEL_FILTERS",
    "PURPOSE_FILTERS",
    "PageAssets",
    "console_router",
    "console_strings",
    "json_for_script",
    "page_locale",
    "render_page",
]
