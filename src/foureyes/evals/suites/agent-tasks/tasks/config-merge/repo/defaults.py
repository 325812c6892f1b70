DEFAULTS = {
    "theme": "light",
    "language": "en",
    "editor": {"tab_width": 4, "wrap": False, "rulers": [80]},
    "plugins": [],
}
