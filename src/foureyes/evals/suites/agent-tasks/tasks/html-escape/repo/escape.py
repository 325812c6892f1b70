def escape(text):
    """``text``, safe to put in an HTML page."""
    return text.replace("<", "&lt;").replace(">", "&gt;")
