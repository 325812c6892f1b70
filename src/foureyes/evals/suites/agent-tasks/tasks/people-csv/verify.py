"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys
import tempfile

sys.path.insert(0, os.getcwd())
from report import mailing_list, team_sizes

failed = 0
folder = tempfile.mkdtemp()


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc!r}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


def export(name, text, bom=True, newline="\r\n"):
    """A file as the spreadsheet writes it."""
    path = os.path.join(folder, name)
    data = text.replace("\n", newline).encode("utf-8")
    with open(path, "wb") as file:
        file.write((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


PEOPLE = "name,email,team\nAda Lovelace,ada@example.com,core\nGrace Hopper,grace@example.com,compilers\n"
WORLD = (
    "name,email,team\nZoë Brontë,zoe@example.com,docs\n李雷,li@example.com,core\n"
    "\"Nguyễn, Văn\",van@example.com,core\nJosé,jose@example.com,docs\n"
)
TEAM_FIRST = "team,name,email\ncore,Ada,ada@example.com\ncore,Linus,linus@example.com\nweb,Tim,tim@example.com\n"
EMAIL_FIRST = "email,team,name\nada@example.com,core,Ada\n"

expect("reported export", lambda: mailing_list(export("people.csv", PEOPLE)), ["Ada Lovelace <ada@example.com>", "Grace Hopper <grace@example.com>"])
expect("team sizes of the reported export", lambda: team_sizes(export("people.csv", PEOPLE)), {"core": 1, "compilers": 1})
expect("names in any script", lambda: mailing_list(export("world.csv", WORLD)), ["Zoë Brontë <zoe@example.com>", "李雷 <li@example.com>", "Nguyễn, Văn <van@example.com>", "José <jose@example.com>"])
expect("teams in any script", lambda: team_sizes(export("world.csv", WORLD)), {"docs": 2, "core": 2})
expect("team column first", lambda: team_sizes(export("teams.csv", TEAM_FIRST)), {"core": 2, "web": 1})
expect("team column first, mailing list", lambda: mailing_list(export("teams.csv", TEAM_FIRST)), ["Ada <ada@example.com>", "Linus <linus@example.com>", "Tim <tim@example.com>"])
expect("email column first", lambda: mailing_list(export("emails.csv", EMAIL_FIRST)), ["Ada <ada@example.com>"])
expect("email column first, teams", lambda: team_sizes(export("emails.csv", EMAIL_FIRST)), {"core": 1})
expect("no byte-order mark", lambda: mailing_list(export("plain.csv", WORLD, bom=False)), ["Zoë Brontë <zoe@example.com>", "李雷 <li@example.com>", "Nguyễn, Văn <van@example.com>", "José <jose@example.com>"])
expect("no byte-order mark, teams first", lambda: team_sizes(export("plain2.csv", TEAM_FIRST, bom=False)), {"core": 2, "web": 1})
expect("unix line ends", lambda: team_sizes(export("unix.csv", TEAM_FIRST, newline="\n")), {"core": 2, "web": 1})
expect("header only", lambda: (mailing_list(export("empty.csv", "name,email,team\n")), team_sizes(export("empty.csv", "name,email,team\n"))), ([], {}))
sys.exit(1 if failed else 0)
