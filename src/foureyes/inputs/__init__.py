"""Input checks: what comes in, judged by code and bound to the exact bytes judged (issue 42).

Start with :class:`InputChecks` (``InputChecks.builtin().scan(text)``, or
``InputChecks.from_config(config.input)`` for the registered checks and the team's
patterns): its :class:`InputScan` holds every :class:`Finding` (check, category, span,
reason; never the text) and the SHA-256 of the text's UTF-8 bytes, so a decision on the
scan names what it judged. A text too long to judge, or without UTF-8 bytes, is refused
with its reason (:class:`ScanRefusal`) and is never clean; a check that raises or returns
nonsense reports its categories over the whole text (``check_failed``,
``invalid_finding``).

The built-in checks (:data:`BUILTIN_CHECKS`) are deterministic: invisible and tag
characters, control characters, encoded payloads decoded and scanned again, instruction
and jailbreak heuristics in en, zh-Hans and zh-Hant, and personal data (phone numbers via
``phonenumbers``, payment cards by Luhn, IBANs by mod 97, Chinese resident ids by GB 11643,
e-mail). :func:`mask` replaces personal data by placeholders reversibly within a request
(:meth:`Masked.restore`). Checks are plugins in the ``foureyes.checks`` entry-point group
(a local classifier wraps the same way, :data:`CheckKind.MODEL`); :func:`catalogue` lists
them beside the output rules. Everything here is pure and synchronous; the gateway and
:class:`foureyes.Guard` run it as the ``[input]`` stage (:mod:`foureyes.inputs.stage`
decides, :mod:`foureyes.inputs.model_check` asks the ``input_checker`` model).
docs/inputs.md has the details and the measured rates.
"""

from foureyes.inputs.check import (
    CheckContext,
    CheckFunction,
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    InputScan,
    Manifest,
    ScanRefusal,
    scan,
)
from foureyes.inputs.masking import Masked, mask
from foureyes.inputs.registry import (
    BUILTIN_CHECKS,
    CatalogueEntry,
    InputChecks,
    catalogue,
    registered_checks,
)

__all__ = [
    "BUILTIN_CHECKS",
    "CatalogueEntry",
    "CheckContext",
    "CheckFunction",
    "CheckInput",
    "CheckKind",
    "Finding",
    "FindingReason",
    "InputCategory",
    "InputCheck",
    "InputChecks",
    "InputScan",
    "Manifest",
    "Masked",
    "ScanRefusal",
    "catalogue",
    "mask",
    "registered_checks",
    "scan",
]
