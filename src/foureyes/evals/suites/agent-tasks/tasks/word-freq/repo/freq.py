from collections import Counter

from tokens import words


def top_words(text, n=3):
    """The ``n`` most frequent words of ``text``, with how often each occurs."""
    counts = Counter(word.lower() for word in words(text))
    return counts.most_common(n)
