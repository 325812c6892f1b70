def join(base, *parts):
    """The URL of the path ``parts`` under ``base``."""
    return "/".join([base.rstrip("/"), *parts])
