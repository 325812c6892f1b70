from calc.errors import ParseError


def tokens(text):
    """The tokens of ``text``: ("num", value) and ("op", symbol) pairs."""
    found = []
    at = 0
    while at < len(text):
        char = text[at]
        at += 1
        if char.isspace():
            continue
        if char in "0123456789":
            start = at - 1
            while at < len(text) and text[at] in "0123456789":
                at += 1
            found.append(("num", int(text[start:at])))
        elif char in "+-*/()":
            found.append(("op", char))
        else:
            raise ParseError(f"lexer: unexpected character {char!r}")
    return found
