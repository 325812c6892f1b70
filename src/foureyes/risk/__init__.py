"""Crisis triage: L0 keyword gate, L1/L2 assessments, double confirmation, resources, alerts.

One model's word does not count, and every failure degrades to ``unknown``: quiet,
audited, never towards alerting. Importing the package registers the offline L1/L2
responders (lexicon-based, always below the confirmation threshold).
"""

from foureyes.risk.alert import ALERT_TEMPLATES, AlertBlock, decide_alert
from foureyes.risk.assess import CONTEXT_CAP, Assessment, RiskReport, Tier, Turn
from foureyes.risk.calibrate import (
    CalibrationReport,
    Case,
    CaseFormat,
    Thresholds,
    cohen_kappa,
    load_cases,
    load_thresholds,
    run_cases,
    summarise,
)
from foureyes.risk.confirm import Confirmation, ConfirmationCheck, confirm, policy_for
from foureyes.risk.guardian import AlertOutcome, AlertStatus, GuardianAlerts
from foureyes.risk.l0 import L0Category, L0Gate, L0Match, L0Result, L0Signal
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.notifiers import (
    AlertMessage,
    Delivery,
    FileNotifier,
    Notifier,
    WebhookNotifier,
    build_notifier,
)
from foureyes.risk.offline import OFFLINE_CONFIDENCE
from foureyes.risk.resources import (
    PhoneMention,
    ResourceEntry,
    ResourceKind,
    ResourceRegistry,
    SourceKind,
    default_registry,
    find_phone_numbers,
    load_registry,
    registry_from_file,
    render_resources,
    resources_for,
    secondary_entries,
    stale_entries,
    unverified_numbers,
)
from foureyes.risk.result import RunPurpose, SuppressReason, TriageResult
from foureyes.risk.screen_model import ScreenModel, default_screen_model, load_screen_model
from foureyes.risk.trend import Trend, compute_trend
from foureyes.risk.triage import Screening, Triage, TriageRequest

__all__ = [
    "ALERT_TEMPLATES",
    "AlertBlock",
    "AlertMessage",
    "AlertOutcome",
    "AlertStatus",
    "Assessment",
    "CONTEXT_CAP",
    "CalibrationReport",
    "Case",
    "CaseFormat",
    "Confirmation",
    "ConfirmationCheck",
    "Delivery",
    "FileNotifier",
    "GuardianAlerts",
    "L0Category",
    "L0Gate",
    "L0Match",
    "L0Result",
    "L0Signal",
    "Notifier",
    "OFFLINE_CONFIDENCE",
    "PhoneMention",
    "ResourceEntry",
    "ResourceKind",
    "ResourceRegistry",
    "RiskLevel",
    "RiskReport",
    "RiskStatus",
    "RunPurpose",
    "ScreenModel",
    "Screening",
    "SourceKind",
    "SuppressReason",
    "Thresholds",
    "Tier",
    "Trend",
    "Triage",
    "TriageRequest",
    "TriageResult",
    "Turn",
    "WebhookNotifier",
    "build_notifier",
    "cohen_kappa",
    "compute_trend",
    "confirm",
    "decide_alert",
    "default_registry",
    "default_screen_model",
    "find_phone_numbers",
    "load_cases",
    "load_registry",
    "load_screen_model",
    "load_thresholds",
    "policy_for",
    "registry_from_file",
    "render_resources",
    "resources_for",
    "run_cases",
    "secondary_entries",
    "stale_entries",
    "summarise",
    "unverified_numbers",
]
