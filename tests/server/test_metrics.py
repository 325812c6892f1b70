from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from foureyes.core.errors import UsageError
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.risk.levels import RiskLevel
from foureyes.server.app import create_app
from foureyes.server.metrics import Metrics
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, keyed


def _sample(text: str | bytes, name: str, **labels: str) -> float | None:
    raw = text.decode() if isinstance(text, bytes) else text
    for family in text_string_to_metric_families(raw):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def test_every_reason_code_is_exported_from_the_start() -> None:
    text = Metrics().exposition()
    for reason in ReasonCode:
        assert _sample(text, "foureyes_decisions_total", reason=reason.value) == 0.0
    assert _sample(text, "foureyes_build_info") == 1.0


def test_decisions_risk_model_calls_and_budget_are_recorded() -> None:
    metrics = Metrics()
    metrics.record_decision(ReasonCode.APPROVED)
    metrics.record_decision(ReasonCode.REVIEW_TIMEOUT)
    metrics.record_decision(ReasonCode.REVIEW_TIMEOUT)
    metrics.record_risk("L1", RiskLevel.HIGH)
    metrics.record_risk("L0", None)
    metrics.observe_model_call(Role.SUPERVISOR, "flash", 0.2, "ok")
    metrics.observe_model_call(Role.SUPERVISOR, "flash", 12.0, "RouteTimeout")
    metrics.set_budget_remaining("route:flash", 7, 0.25)

    text = metrics.exposition()
    assert _sample(text, "foureyes_decisions_total", reason="review_timeout") == 2.0
    assert _sample(text, "foureyes_decisions_total", reason="approved") == 1.0
    assert _sample(text, "foureyes_risk_triages_total", tier="L1", level="high") == 1.0
    assert _sample(text, "foureyes_risk_triages_total", tier="L0", level="unknown") == 1.0
    labels = {"role": "supervisor", "route": "flash"}
    assert _sample(text, "foureyes_model_calls_total", outcome="RouteTimeout", **labels) == 1.0
    assert _sample(text, "foureyes_model_call_duration_seconds_count", **labels) == 2.0
    assert _sample(text, "foureyes_model_call_duration_seconds_sum", **labels) == 12.2
    assert _sample(text, "foureyes_budget_remaining_calls", key="route:flash") == 7.0
    assert _sample(text, "foureyes_budget_remaining_usd", key="route:flash") == 0.25


def test_a_budget_without_maximum_has_no_series_and_overuse_shows_as_zero() -> None:
    metrics = Metrics()
    metrics.set_budget_remaining("k", 3, 1.0)
    metrics.set_budget_remaining("k", -2, None)
    metrics.set_budget_remaining("never-set", None, None)
    text = metrics.exposition()
    assert _sample(text, "foureyes_budget_remaining_calls", key="k") == 0.0
    assert _sample(text, "foureyes_budget_remaining_usd", key="k") is None


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.record_risk("L3", RiskLevel.LOW),
        lambda m: m.record_risk("l1", None),
        lambda m: m.observe_model_call(Role.COUNSELOR, "r", -1.0, "ok"),
        lambda m: m.observe_model_call(Role.COUNSELOR, "r", math.nan, "ok"),
        lambda m: m.observe_model_call(Role.COUNSELOR, "r", 0.1, "user said hello"),
        lambda m: m.record_decision("made_up"),
    ],
)
def test_values_outside_the_closed_sets_are_refused(call: object) -> None:
    metrics = Metrics()
    with pytest.raises((UsageError, ValueError)):
        call(metrics)  # type: ignore[operator]


def test_apps_have_separate_registries() -> None:
    first, second = Metrics(), Metrics()
    first.record_decision(ReasonCode.REJECTED)
    assert _sample(first.exposition(), "foureyes_decisions_total", reason="rejected") == 1.0
    assert _sample(second.exposition(), "foureyes_decisions_total", reason="rejected") == 0.0


async def test_metrics_need_the_admin_scope() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        anonymous = await client.get("/metrics")
        as_client = await client.get("/metrics", headers=bearer(CLIENT_KEY))
        as_admin = await client.get("/metrics", headers=bearer(ADMIN_KEY))
    assert (anonymous.status_code, as_client.status_code) == (401, 403)
    assert as_admin.status_code == 200
    assert as_admin.headers["content-type"].startswith("text/plain")


async def test_requests_are_counted_by_route_template_and_status() -> None:
    app = create_app(keyed(max_body_bytes=1024), KEYS_ENV)
    admin = bearer(ADMIN_KEY)
    async with app_client(app) as client:
        await client.get("/v1/models", headers=bearer(CLIENT_KEY))
        await client.get("/v1/models")
        await client.delete("/v1/keys/fy_12345678", headers=admin)
        await client.delete("/v1/keys/fy_abcdef12", headers=admin)
        await client.get("/v1/no-such-thing")
        await client.post("/v1/keys", content=b"x" * 2048, headers=admin)
        await client.request("BREW", "/v1/models")
        text = (await client.get("/metrics", headers=admin)).text

    def count(route: str, status: str, method: str = "GET") -> float | None:
        labels = {"route": route, "method": method, "status": status}
        return _sample(text, "foureyes_http_requests_total", **labels)

    assert count("/v1/models", "200") == 1.0
    assert count("/v1/models", "401") == 1.0
    # Templates, not raw paths: the two refs share one series.
    assert count("/v1/keys/{ref}", "404", "DELETE") == 2.0
    assert count("unmatched", "404") == 1.0
    # Refused before routing, on its declared length.
    assert count("unmatched", "413", "POST") == 1.0
    assert count("/v1/models", "405", "OTHER") == 1.0
    assert "fy_12345678" not in text and "no-such-thing" not in text


async def test_the_apps_metrics_object_is_on_the_service() -> None:
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        app.state.service.metrics.record_decision(ReasonCode.RULE_VIOLATION)
        text = (await client.get("/metrics", headers=bearer(ADMIN_KEY))).text
    assert _sample(text, "foureyes_decisions_total", reason="rule_violation") == 1.0


async def test_unopenable_unknowns_are_counted_from_the_store() -> None:
    metrics = Metrics()
    assert _sample(metrics.exposition(), "foureyes_unknowns_unopenable_total") is None
    seen = [0]
    metrics.watch_unopenable_unknowns(lambda: seen[0])
    seen[0] = 3
    assert _sample(metrics.exposition(), "foureyes_unknowns_unopenable_total") == 3.0
    # A running app exports its store's count from the start.
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        text = (await client.get("/metrics", headers=bearer(ADMIN_KEY))).text
    assert _sample(text, "foureyes_unknowns_unopenable_total") == 0.0
