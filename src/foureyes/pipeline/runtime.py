"""What one foureyes process runs on, opened and closed in one place.

:meth:`Runtime.open` checks the config's secrets and review requirement, builds every
route's provider, opens (and migrates) the store, and composes the support pipeline and
the masked reviewer over them. ``foureyes serve`` (:func:`foureyes.server.create_app`)
and the library (:class:`foureyes.Guard`) both open one, so a check, a reply or a review
made through either runs the same code on the same parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from foureyes.config import Config
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.pipeline._buffer import EventObserver
from foureyes.pipeline.support import SupportPipeline
from foureyes.review.publication import PublicationPolicy
from foureyes.review.reviewer import Reviewer
from foureyes.review.runner import ReviewRunner
from foureyes.risk.l0 import L0Gate
from foureyes.store import Store

__all__ = ["Runtime"]


@dataclass(frozen=True, slots=True)
class Runtime:
    """The routes, the open store, the pipeline and the reviewer of one process."""

    config: Config
    """The effective configuration."""
    routes: Routes
    """One provider per configured route."""
    store: Store
    """The open store."""
    pipeline: SupportPipeline
    """Triage and the release gate (replies and checks of a caller's draft)."""
    l0: L0Gate
    """The pipeline's keyword gate."""
    reviewer: Reviewer
    """Masked reviews of agent sessions."""

    @classmethod
    async def open(
        cls,
        config: Config,
        environ: Mapping[str, str],
        *,
        observer: EventObserver | None = None,
    ) -> Runtime:
        """Build the routes, open ``config.store`` and compose the pipeline and reviewer.

        Args:
            config: the effective configuration (its ``store`` says where the store is).
            environ: the environment holding the secret variables the config names.
            observer: called with every trace event of the pipeline's runs (metrics).

        Raises:
            ConfigError: a route cannot be built, a secret variable is not set, no second
                model reviews a model Counselor's replies, the notifier or the resource
                registry cannot be built.
            StoreError: the store cannot be opened or migrated.
        """
        config.require_secrets(environ)
        config.require_review()
        routes = Routes.build(config, environ)
        try:
            store = await Store.open(config.store, config.privacy, environ)
        except BaseException:
            await routes.aclose()
            raise
        try:
            l0 = L0Gate.default()
            pipeline = SupportPipeline(
                config,
                routes,
                store,
                alerts=SupportPipeline.alerts_for(config, store),
                l0=l0,
                observer=observer,
            )
        except BaseException:
            await routes.aclose()
            await store.close()
            raise
        caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
        reviewer = Reviewer(
            ReviewRunner(caller, packet_max_chars=config.review.packet_max_chars),
            config.review,
            policy=PublicationPolicy(config.review.publish),
        )
        return cls(config, routes, store, pipeline, l0, reviewer)

    async def aclose(self) -> None:
        """Wait for the pipeline's background work, then close the routes and the store."""
        try:
            await self.pipeline.aclose()
        finally:
            try:
                await self.routes.aclose()
            finally:
                await self.store.close()
