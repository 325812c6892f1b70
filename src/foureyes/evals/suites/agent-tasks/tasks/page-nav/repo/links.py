from paging import page_count


def nav(page, total, per_page):
    """The navigation links shown under ``page`` of a search."""
    last = page_count(total, per_page)
    return {
        "prev": page - 1 if page > 1 else None,
        "next": page + 1 if page < last else None,
        "last": last,
    }
