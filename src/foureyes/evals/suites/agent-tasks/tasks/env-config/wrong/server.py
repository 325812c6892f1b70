from config import load_config


def listen_address(environ=None):
    """Where the server listens: host, port, and the admin port next to it."""
    config = load_config(environ)
    port = int(config["port"])
    return config["host"], port, port + 1
