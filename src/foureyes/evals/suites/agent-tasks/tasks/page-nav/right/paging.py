def page_count(total, per_page):
    """How many pages ``total`` results take."""
    return max(1, -(-total // per_page))


def page_items(items, page, per_page):
    """The items shown on ``page`` (numbered from 1)."""
    if not 1 <= page <= page_count(len(items), per_page):
        raise LookupError(f"no page {page}")
    start = (page - 1) * per_page
    return items[start : start + per_page]
