"""The hidden verifier: the reported case and the edges a fix must get right."""

import copy
import os
import sys

sys.path.insert(0, os.getcwd())
from loader import load_settings

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


SHIPPED = {
    "theme": "light",
    "language": "en",
    "editor": {"tab_width": 4, "wrap": False, "rulers": [80]},
    "plugins": [],
}


def shipped(**changes):
    settings = copy.deepcopy(SHIPPED)
    for key, value in changes.items():
        if isinstance(value, dict):
            settings[key].update(value)
        else:
            settings[key] = value
    return settings


def in_turn(*texts):
    return [load_settings(text) for text in texts]


def mutated_then_loaded(change):
    first = load_settings("{}")
    change(first)
    return load_settings("{}")


expect("reported: Bob after Alice", lambda: in_turn('{"theme": "dark"}', "{}")[1], shipped())
expect("Alice keeps hers", lambda: in_turn('{"theme": "dark"}', "{}")[0], shipped(theme="dark"))
expect("nested after nested", lambda: in_turn('{"editor": {"tab_width": 2}}', "{}")[1], shipped())
expect("nested merge keeps the rest", lambda: load_settings('{"editor": {"wrap": true}}'), shipped(editor={"wrap": True}))
expect("two nested users", lambda: in_turn('{"editor": {"tab_width": 2}}', '{"editor": {"wrap": true}}'), [shipped(editor={"tab_width": 2}), shipped(editor={"wrap": True})])
expect("a list replaced", lambda: in_turn('{"plugins": ["git"]}', "{}"), [shipped(plugins=["git"]), shipped()])
expect("appending to one user's plugins", lambda: mutated_then_loaded(lambda s: s["plugins"].append("vim")), shipped())
expect("changing one user's editor", lambda: mutated_then_loaded(lambda s: s["editor"].update(tab_width=8)), shipped())
expect("changing one user's rulers", lambda: mutated_then_loaded(lambda s: s["editor"]["rulers"].append(120)), shipped())
expect("changing one user's theme", lambda: mutated_then_loaded(lambda s: s.update(theme="blue")), shipped())
expect("a new key", lambda: in_turn('{"font": "mono"}', "{}"), [shipped(font="mono"), shipped()])
expect("later loads do not change earlier ones", lambda: (lambda a: (load_settings('{"language": "fr", "editor": {"rulers": []}}'), a)[1])(load_settings("{}")), shipped())
expect("many users", lambda: in_turn(*[f'{{"language": "l{n}"}}' for n in range(5)], "{}")[-1], shipped())
sys.exit(1 if failed else 0)
