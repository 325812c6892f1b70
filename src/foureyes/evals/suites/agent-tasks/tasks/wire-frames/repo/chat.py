from wire import decode_frames, encode_frame


def send(messages):
    """The bytes that carry ``messages`` to the server."""
    return b"".join(encode_frame(message) for message in messages)


def receive(data):
    """The messages that the bytes ``data`` from the server carry."""
    return decode_frames(data)
