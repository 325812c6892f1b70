def count_words(text):
    """How many words ``text`` has."""
    return len([word for word in text.split(" ") if word])
