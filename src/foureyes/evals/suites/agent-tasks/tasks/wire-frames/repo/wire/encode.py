def encode_frame(text):
    """The frame that carries ``text``: its length, then the text itself."""
    payload = text.encode("utf-8")
    return len(text).to_bytes(2, "big") + payload
