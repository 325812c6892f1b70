from foureyes.core.reasons import ReasonCode

# docs/design.md 5 pins these wire strings; users and dashboards rely on them
# (``tool_not_allowed`` came with tool calls in the candidate, issue 15; the three
# ``input_*`` with the input stage, issue 42).
PINNED = [
    "approved",
    "rejected",
    "insufficient",
    "review_timeout",
    "review_failed",
    "review_malformed",
    "verdict_mismatch",
    "rule_violation",
    "draft_failed",
    "generation_prohibited",
    "deadline_exceeded",
    "budget_exhausted",
    "tool_not_allowed",
    "input_blocked",
    "input_restricted",
    "input_unchecked",
]


def test_reason_codes_are_exactly_the_pinned_set_in_order() -> None:
    assert [r.value for r in ReasonCode] == PINNED


def test_only_approved_releases() -> None:
    assert [r for r in ReasonCode if not r.is_fallback] == [ReasonCode.APPROVED]


def test_review_failures_are_the_three_review_codes() -> None:
    assert {r.value for r in ReasonCode if r.is_review_failure} == {
        "review_timeout",
        "review_failed",
        "review_malformed",
    }


def test_every_member_is_documented() -> None:
    import ast
    import inspect

    from foureyes.core import reasons

    tree = ast.parse(inspect.getsource(reasons))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ReasonCode")
    documented = set()
    for prev, node in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(prev, ast.Assign)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
        ):
            documented.add(prev.targets[0].id)  # type: ignore[attr-defined]
    assert documented == {r.name for r in ReasonCode}
