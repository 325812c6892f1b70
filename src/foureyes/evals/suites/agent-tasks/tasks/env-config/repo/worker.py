from config import load_config


def pool_plan(environ=None):
    """How the worker pool is set up."""
    config = load_config(environ)
    return {
        "workers": config["workers"],
        "debug": config["debug"],
        "timeout": config["timeout"],
    }
