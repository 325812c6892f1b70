from calc.errors import ParseError


def tokens(text):
    """The tokens of ``text``: ("num", value) and ("op", symbol) pairs."""
    found = []
    for char in text:
        if char.isspace():
            continue
        if char in "0123456789":
            found.append(("num", int(char)))
        elif char in "+-*/()":
            found.append(("op", char))
        else:
            raise ParseError(f"lexer: unexpected character {char!r}")
    return found
