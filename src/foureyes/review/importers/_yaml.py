"""The YAML subset VCR cassettes are written in, read without a YAML dependency.

VCR cassettes (vcrpy) are YAML as PyYAML's dumper writes it. :func:`load_yaml` reads
exactly that subset: block mappings and sequences (including sequences indented like
their parent key), plain, single- and double-quoted scalars spread over several lines,
literal and folded block scalars, and the empty flow collections ``{}`` and ``[]``.
Anything else (anchors, tags, flow collections with content) is not read; a cassette
never holds them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

__all__ = ["YamlSubsetError", "load_yaml"]


class YamlSubsetError(ValueError):
    """Raised when a text is not YAML of the subset VCR cassettes are written in."""


def load_yaml(text: str) -> Any:
    """The value of the YAML document ``text`` (the cassette subset, see the module).

    Raises:
        YamlSubsetError: ``text`` is not YAML of that subset.
    """
    try:
        return _Reader(text).block(0)
    except (IndexError, KeyError, ValueError) as exc:
        raise YamlSubsetError(f"not YAML of the cassette subset: {type(exc).__name__}") from None


_KEY = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s'"#{}\[\]-][^:]*?):(?: |$)""")
_SINGLE_END = re.compile(r"((?:[^']|'')*)'(?!')", re.DOTALL)
_DOUBLE_END = re.compile(r'((?:[^"\\]|\\.)*)"', re.DOTALL)
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_item(line: str, indent: int) -> bool:
    return _indent(line) == indent and (line[indent:].startswith("- ") or line[indent:] == "-")


def _plain(text: str) -> Any:
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return text.lower() == "true"
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def _fold(lines: list[str], glued: Collection[int] = ()) -> str:
    """Join flow-scalar lines: a break is a space, blank lines are breaks, glued lines touch."""
    out, breaks = lines[0], 0
    for n, line in enumerate(lines[1:], start=1):
        if not line and n < len(lines) - 1:
            breaks += 1
            continue
        out += ("" if n - 1 - breaks in glued else "\n" * breaks or " ") + line
        breaks = 0
    return out


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
            continue
        code = text[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(code, 0)
        out.append(chr(int(text[i + 2 : i + 2 + width], 16)) if width else _ESCAPES[code])
        i += 2 + width
    return "".join(out)


def _double_quoted(body: str) -> str:
    lines, glued = body.split("\n"), set()
    cooked = []
    for n, line in enumerate(lines):
        line = line.lstrip(" \t") if n else line
        if n < len(lines) - 1:
            kept = line.rstrip(" \t")
            escaped = (len(kept) - len(kept.rstrip("\\"))) % 2 == 1
            if escaped and kept == line:  # "\" at the end: the break itself is escaped
                line = kept[:-1]
                glued.add(n)
            else:  # trailing blanks go, unless the first of them is escaped
                line = kept + line[len(kept)] if escaped else kept
        cooked.append(line)
    return _unescape(_fold(cooked, glued))


def _single_quoted(body: str) -> str:
    lines = body.split("\n")
    stripped = [line if n == 0 else line.lstrip(" ") for n, line in enumerate(lines)]
    stripped = [line.rstrip(" ") if n < len(lines) - 1 else line for n, line in enumerate(stripped)]
    return _fold(stripped).replace("''", "'")


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.i = 0

    def _next_content(self) -> str:
        while self.i < len(self.lines) and not self.lines[self.i].strip():
            self.i += 1
        return self.lines[self.i] if self.i < len(self.lines) else ""

    def block(self, indent: int) -> Any:
        line = self._next_content()
        return self.sequence(indent) if _is_item(line, indent) else self.mapping(indent)

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while _is_item(line := self._next_content(), indent):
            rest = line[indent + 1 :].lstrip(" ")
            if not rest:
                self.i += 1
                items.append(self.block(_indent(self._next_content())))
            elif _KEY.match(rest):
                # "- key: value" opens a mapping whose keys line up with "key".
                column = len(line) - len(rest)
                self.lines[self.i] = " " * column + rest
                items.append(self.mapping(column))
            else:
                self.i += 1
                items.append(self.scalar(rest, indent))
        return items

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while _indent(line := self._next_content()) == indent and line.strip():
            found = _KEY.match(line[indent:])
            if found is None:
                break
            raw_key = found.group(1)
            key = _plain(raw_key) if raw_key[0] not in "'\"" else self._quoted_key(raw_key)
            rest = line[indent + found.end() :].strip()
            self.i += 1
            if rest:
                result[str(key)] = self.scalar(rest, indent)
                continue
            nxt = self._next_content()
            if nxt.strip() and _indent(nxt) > indent:
                result[str(key)] = self.block(_indent(nxt))
            elif _is_item(nxt, indent):  # PyYAML puts a key's sequence at the key's column
                result[str(key)] = self.sequence(indent)
            else:
                result[str(key)] = None
        return result

    @staticmethod
    def _quoted_key(raw: str) -> str:
        return _single_quoted(raw[1:-1]) if raw[0] == "'" else _double_quoted(raw[1:-1])

    def _more_indented(self, indent: int) -> list[str]:
        lines = []
        while self.i < len(self.lines) and (
            not self.lines[self.i].strip() or _indent(self.lines[self.i]) > indent
        ):
            lines.append(self.lines[self.i])
            self.i += 1
        while lines and not lines[-1].strip():
            lines.pop()
            self.i -= 1
        return lines

    def scalar(self, text: str, indent: int) -> Any:
        """The scalar starting with ``text`` (the rest of the current line) and its continuation."""
        if text[0] in "|>":
            lines = self._more_indented(indent)
            width = min((_indent(line) for line in lines if line.strip()), default=0)
            body = [line[width:] for line in lines]
            value = _fold(body) if text[0] == ">" else "\n".join(body)
            return value if "-" in text else value + "\n"
        if text[0] in "'\"":
            end = _SINGLE_END if text[0] == "'" else _DOUBLE_END
            joined = text[1:]
            while (found := end.match(joined)) is None:
                joined += "\n" + self.lines[self.i]
                self.i += 1
            quoted = found.group(1)
            return _single_quoted(quoted) if text[0] == "'" else _double_quoted(quoted)
        lines = [text, *self._more_indented(indent)]
        return _plain(text) if len(lines) == 1 else _fold([line.strip() for line in lines])
