def page_count(total, per_page):
    """How many pages ``total`` results take."""
    return total // per_page + 1


def page_items(items, page, per_page):
    """The items shown on ``page`` (numbered from 1)."""
    if not 1 <= page <= page_count(len(items), per_page):
        raise LookupError(f"no page {page}")
    start = (page - 1) * per_page
    return items[start : start + per_page]
