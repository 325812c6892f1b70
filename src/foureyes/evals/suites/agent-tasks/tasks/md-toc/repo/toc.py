from anchors import anchor
from headings import headings


def toc(markdown):
    """The table of contents of ``markdown``."""
    return "\n".join(
        f"{'  ' * (level - 1)}- [{title}](#{anchor(title)})"
        for level, title in headings(markdown)
    )
