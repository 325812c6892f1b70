from calc.errors import ParseError

END = ("end", None)


class _Parser:
    def __init__(self, tokens):
        self.tokens = list(tokens)
        self.at = 0

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else END

    def take(self):
        token = self.peek()
        self.at += 1
        return token

    def expression(self):
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            right = self.term()
            value = value + right if op == "+" else value - right
        return value

    def term(self):
        value = self.factor()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            right = self.factor()
            value = value * right if op == "*" else value / right
        return value

    def factor(self):
        kind, value = self.take()
        if kind == "num":
            # TODO(#31): multi-digit numbers; join consecutive digits here.
            return value
        if (kind, value) == ("op", "("):
            inner = self.expression()
            if self.take() != ("op", ")"):
                raise ParseError("parser: expected ')'")
            return inner
        raise ParseError(f"parser: unexpected {value!r}")


def parse(tokens):
    """The value of the expression made of ``tokens``."""
    parser = _Parser(tokens)
    value = parser.expression()
    kind, extra = parser.peek()
    if kind != "end":
        raise ParseError(f"parser: expected an operator after {value!r}, got {extra!r}")
    return value
