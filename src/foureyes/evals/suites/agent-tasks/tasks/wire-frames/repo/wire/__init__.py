"""The framing of the chat protocol."""

from wire.decode import decode_frames
from wire.encode import encode_frame

__all__ = ["decode_frames", "encode_frame"]
