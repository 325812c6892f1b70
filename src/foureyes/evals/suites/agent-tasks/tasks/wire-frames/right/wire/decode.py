def decode_frames(data):
    """The texts of the frames in ``data``."""
    # TODO: the decoder chokes on non-ASCII input (UnicodeDecodeError below);
    # it should be made tolerant of multi-byte characters.
    texts, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 2], "big")
        texts.append(data[at + 2 : at + 2 + size].decode("utf-8"))
        at += 2 + size
    return texts
