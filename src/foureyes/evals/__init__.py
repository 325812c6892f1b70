"""Paired-arm evaluation: does a mechanism help, at what cost, and how sure are we.

A :class:`Suite` of frozen cases is run under named :class:`Arm` configurations by the
:class:`EvalRunner` (bounded, budgeted, resumable; each pair stored as it finishes).
Model exchanges can be recorded into a cassette and replayed offline
(:func:`eval_providers`); :mod:`foureyes.evals.stats` holds the paired statistics and
:func:`write_report` the HTML and Markdown reports. Agent suites run a Primary
(:class:`AgentLoop`) over a sandboxed :class:`Workspace` of each task. See
``docs/evals.md``.
"""

from foureyes.evals.agent import (
    AGENT_SYSTEM,
    AgentLoop,
    AgentResult,
    Checkpoint,
    PublicationHook,
    StopReason,
    review_checkpoint,
)
from foureyes.evals.agent_arm import AGENT_MAX_STEPS, DONE, NOT_DONE, answer_agent_case
from foureyes.evals.agent_tasks import AgentTask, TaskFix, agent_task, apply_fix, task_workspace
from foureyes.evals.arms import (
    CASE_DRAFT_ROUTE,
    CaseAnswer,
    FrozenDraft,
    answer_case,
    arm_config,
    arm_routes,
    runnable_arms,
)
from foureyes.evals.cassette import (
    CassetteMiss,
    RecordingProvider,
    ReplayProvider,
    eval_providers,
    exchange_key,
    load_cassette,
)
from foureyes.evals.metrics import (
    ArmMetrics,
    PairRecord,
    RunMetrics,
    TriageAgreement,
    compute_metrics,
    confusion,
)
from foureyes.evals.report import (
    ReportFiles,
    ReportPlot,
    ReportTable,
    ReportView,
    html_of,
    load_metrics,
    markdown_of,
    render_html,
    render_markdown,
    report_strings,
    report_view,
    write_report,
)
from foureyes.evals.review_arm import NO_REVIEW, answer_review_case
from foureyes.evals.runner import (
    ARM_BUDGET_EXHAUSTED,
    PAIR_DEADLINE,
    RUN_ID,
    EvalRunner,
    PairDone,
    RunSummary,
    check_run_id,
    new_run_id,
    run_facts,
)
from foureyes.evals.stats import (
    NO_SIGNIFICANT_DIFFERENCE,
    Interval,
    PairedComparison,
    bootstrap_ci,
    cohen_kappa,
    compare_paired,
    mcnemar_exact,
    pearson,
)
from foureyes.evals.suite import (
    Arm,
    Case,
    Suite,
    SuiteError,
    SuiteKind,
    load_suite,
    shipped_suites,
    suite_path,
)
from foureyes.evals.verify import VerifierResult, run_verifier
from foureyes.evals.workspace import TOOL_SPECS, ToolLimits, ToolOutcome, Workspace, minimal_env

__all__ = [
    "AGENT_MAX_STEPS",
    "AGENT_SYSTEM",
    "ARM_BUDGET_EXHAUSTED",
    "AgentLoop",
    "AgentResult",
    "AgentTask",
    "Arm",
    "ArmMetrics",
    "CASE_DRAFT_ROUTE",
    "Case",
    "CaseAnswer",
    "CassetteMiss",
    "Checkpoint",
    "DONE",
    "EvalRunner",
    "FrozenDraft",
    "Interval",
    "NOT_DONE",
    "NO_REVIEW",
    "NO_SIGNIFICANT_DIFFERENCE",
    "PAIR_DEADLINE",
    "PairDone",
    "PairRecord",
    "PairedComparison",
    "PublicationHook",
    "RUN_ID",
    "RecordingProvider",
    "ReplayProvider",
    "ReportFiles",
    "ReportPlot",
    "ReportTable",
    "ReportView",
    "RunMetrics",
    "RunSummary",
    "StopReason",
    "Suite",
    "SuiteError",
    "SuiteKind",
    "TOOL_SPECS",
    "TaskFix",
    "ToolLimits",
    "ToolOutcome",
    "TriageAgreement",
    "VerifierResult",
    "Workspace",
    "agent_task",
    "answer_agent_case",
    "answer_case",
    "answer_review_case",
    "apply_fix",
    "arm_config",
    "arm_routes",
    "bootstrap_ci",
    "check_run_id",
    "cohen_kappa",
    "compare_paired",
    "compute_metrics",
    "confusion",
    "eval_providers",
    "exchange_key",
    "html_of",
    "load_cassette",
    "load_metrics",
    "load_suite",
    "markdown_of",
    "mcnemar_exact",
    "minimal_env",
    "new_run_id",
    "pearson",
    "render_html",
    "render_markdown",
    "report_strings",
    "report_view",
    "review_checkpoint",
    "run_facts",
    "run_verifier",
    "runnable_arms",
    "shipped_suites",
    "suite_path",
    "task_workspace",
    "write_report",
]
