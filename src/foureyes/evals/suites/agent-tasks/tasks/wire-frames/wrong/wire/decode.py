def decode_frames(data):
    """The texts of the frames in ``data``."""
    # A frame's length counts characters: decode first, then take that many.
    texts, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 2], "big")
        text = data[at + 2 :].decode("utf-8", errors="replace")[:size]
        texts.append(text)
        at += 2 + len(text.encode("utf-8"))
    return texts
