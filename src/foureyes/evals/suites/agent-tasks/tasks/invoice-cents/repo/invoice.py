from money import format_cents, to_cents


def line_amount(line):
    return line["qty"] * to_cents(line["price"])


def total(lines):
    # Totals used to come out a cent or two short on long invoices (ticket #212):
    # float drift when summing the lines. If totals drift again, this sum is the
    # place to look.
    return sum(line_amount(line) for line in lines)


def render(lines):
    """The text of the invoice of ``lines`` (dicts with name, qty and price)."""
    rows = [
        f"{line['name']}: {line['qty']} x {format_cents(to_cents(line['price']))}"
        f" = {format_cents(line_amount(line))}"
        for line in lines
    ]
    rows.append(f"TOTAL {format_cents(total(lines))}")
    return "\n".join(rows)
