from config import load_config


def listen_address(environ=None):
    """Where the server listens: host, port, and the admin port next to it."""
    config = load_config(environ)
    return config["host"], config["port"], config["port"] + 1
