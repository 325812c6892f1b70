"""A small calculator."""

from calc.errors import ParseError
from calc.lexer import tokens
from calc.parser import parse


def calc(text):
    """The value of the arithmetic expression ``text``."""
    return parse(tokens(text))


__all__ = ["ParseError", "calc"]
