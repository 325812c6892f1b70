"""What an agent-suite arm does with one case: the Primary works the task, the verifier decides.

Each pair gets a fresh temporary copy of the task's repository; the Primary (the
``primary`` role's route under the arm's config) runs the agent loop in it, then the
task's hidden verifier runs in the same copy, before the copy is removed. The prediction
is ``done`` when the verifier passed and ``not_done`` otherwise (the case expects
``done``). A Primary whose model call failed is a failure with that reason
(``route_failed``, ...), as is a verifier that timed out or could not start; a Primary
that used up its step budget is not a failure: the verifier still judges what it left.
The ``baseline`` arm runs the Primary alone (no publication hook); the reviewing arms
come with the deliberate tool and the arms' hooks.
"""

from __future__ import annotations

from collections.abc import Mapping

from foureyes.config import Config
from foureyes.evals.agent import AgentLoop
from foureyes.evals.agent_tasks import agent_task, task_workspace
from foureyes.evals.arms import CaseAnswer
from foureyes.evals.suite import Arm, Case, Suite
from foureyes.evals.verify import VerifierResult
from foureyes.evals.workspace import Workspace
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import Provider
from foureyes.llm.routes import Routes
from foureyes.store import Store

__all__ = ["AGENT_MAX_STEPS", "DONE", "NOT_DONE", "answer_agent_case"]

DONE = "done"
"""The prediction of a pair whose verifier passed."""
NOT_DONE = "not_done"
"""The prediction of a pair whose verifier rejected the workspace."""
AGENT_MAX_STEPS = 30
"""The Primary's step budget per case."""


async def answer_agent_case(
    suite: Suite,
    arm: Arm,
    case: Case,
    *,
    config: Config,
    providers: Mapping[str, Provider],
    store: Store,
) -> CaseAnswer:
    """Run the Primary on the case's task in a fresh copy and verify what it left.

    Raises:
        StoreError: the store failed.
        CassetteMiss: a replayed request is not in the cassette.
    """
    task = agent_task(suite, case)
    caller = ModelCaller(Routes(config, providers), ledger=store.ledger, trace=store.traces)
    with task_workspace(task) as folder:
        loop = AgentLoop(caller, Workspace(folder), max_steps=AGENT_MAX_STEPS)
        result = await loop.run(task.statement)
        verdict = await task.verify(folder)
    detail = {
        "stop": result.stop.value,
        "steps": result.steps,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "published": len(result.published),
        "verifier": verdict.value,
        "session_sha256": result.session.digest(),
    }
    failure = result.failure
    if failure is None and verdict in (VerifierResult.TIMEOUT, VerifierResult.UNAVAILABLE):
        failure = verdict.value
    return CaseAnswer(
        prediction=DONE if verdict is VerifierResult.PASSED else NOT_DONE,
        output=result.answer,
        failure=failure,
        cost_usd=result.cost_usd,
        calls=result.steps,
        detail=detail,
    )
