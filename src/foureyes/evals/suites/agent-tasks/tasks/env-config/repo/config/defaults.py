DEFAULTS = {
    "host": "127.0.0.1",
    "port": 8000,
    "workers": 2,
    "debug": False,
    "timeout": 30.0,
}
