"""A crisis-resource registry entry for tests that write their own ``resources_file``."""

from __future__ import annotations

from typing import Any

__all__ = ["resource_entry"]


def resource_entry(**fields: Any) -> dict[str, Any]:
    """A valid entry of the registry file's schema (a JP line), with ``fields`` replaced."""
    return {
        "id": "jp-test-line",
        "region": "JP",
        "kind": "crisis_line",
        "name": {"en": "Test line", "zh-Hans": "测试热线", "zh-Hant": "測試熱線"},
        "numbers": ["0570-000-111"],
        "hours": {"en": "24 hours", "zh-Hans": "24小时", "zh-Hant": "24小時"},
        "source": "https://example.org/listing",
        "source_kind": "official",
        "checked": "2026-12-01",
    } | fields
