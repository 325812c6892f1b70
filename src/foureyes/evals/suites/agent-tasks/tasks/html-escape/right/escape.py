import html


def escape(text):
    """``text``, safe to put in an HTML page."""
    return html.escape(text, quote=True)
