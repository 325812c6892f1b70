"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from client import Client

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


API = "https://api.example.com/v1"
for base in ("https://api.example.com/v1/", "https://api.example.com/v1", "https://api.example.com/v1//"):
    expect(f"{base} + users, 42", lambda base=base: Client(base).url("users", 42), f"{API}/users/42")
    expect(f"{base} + /users/", lambda base=base: Client(base).url("/users/"), f"{API}/users")
for parts in [("users", "42"), ("/users", "42"), ("users/", "/42"), ("/users/", "/42/"), ("users/42",), ("/users/42/",)]:
    expect(f"parts {parts}", lambda parts=parts: Client(API + "/").url(*parts), f"{API}/users/42")
expect("deeper path", lambda: Client("http://localhost:8080/").url("/orgs/", "acme", "/repos"), "http://localhost:8080/orgs/acme/repos")
expect("host only", lambda: Client("https://example.com").url("health"), "https://example.com/health")
expect("the scheme keeps its //", lambda: Client("https://example.com/").url("/a//b"), "https://example.com/a/b")
expect("with a query", lambda: Client(API + "/").url("/search/", q="a&b c", page=2), f"{API}/search?page=2&q=a%26b+c")
expect("numbers", lambda: Client(API).url("items", 0, "parts", 7), f"{API}/items/0/parts/7")
sys.exit(1 if failed else 0)
