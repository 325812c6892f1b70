"""A draft streamed in, assembled: :mod:`foureyes.wire.draft_stream`, importable here too."""

from foureyes.wire.draft_stream import (
    DraftAssembler,
    DraftTooLarge,
    assemble_draft,
    line_problem,
    ndjson_lines,
)

__all__ = [
    "DraftAssembler",
    "DraftTooLarge",
    "assemble_draft",
    "line_problem",
    "ndjson_lines",
]
