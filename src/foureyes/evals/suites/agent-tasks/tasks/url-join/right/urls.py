def join(base, *parts):
    """The URL of the path ``parts`` under ``base``."""
    segments = [segment for part in parts for segment in part.split("/") if segment]
    return "/".join([base.rstrip("/"), *segments])
