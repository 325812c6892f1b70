from escape import escape


def comment_html(author, text):
    """The HTML of one comment: its text, with its author shown on hover."""
    return f'<p class="comment" title="{escape(author)}">{escape(text)}</p>'
