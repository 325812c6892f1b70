"""HTTP service (FastAPI): the gateway, JSON API and web console."""

from foureyes.server.app import GATEWAY_MODEL, Service, create_app

__all__ = ["GATEWAY_MODEL", "Service", "create_app"]
