"""Reading agent sessions: native JSONL, OpenAI chat, SWE-agent, OpenHands and VCR cassettes.

:func:`load_session` reads a file and :func:`parse_session` a text, detecting the format
unless one is named (:class:`SessionFormat`). Every importer raises
:class:`~foureyes.review.session.SessionFormatError` on malformed input, whatever the
format; an importer never guesses content it does not find. One module per format:
:mod:`.native`, :mod:`.openai_chat`, :mod:`.swe_agent`, :mod:`.openhands`, :mod:`.vcr`
(its YAML subset read by ``_yaml``, no YAML dependency).
"""

from foureyes.review.importers._load import (
    SessionFormat,
    detect_format,
    load_session,
    parse_session,
)

__all__ = ["SessionFormat", "detect_format", "load_session", "parse_session"]
