"""HTTP service (FastAPI): the gateway, JSON API and web console."""

from foureyes.server._logging import log_event
from foureyes.server.app import GATEWAY_MODEL, Service, create_app
from foureyes.server.auth import AdminKey, AuthMode, ClientKey, Principal, require_scope
from foureyes.server.errors import ApiError, ErrorCode, error_response
from foureyes.server.limits import RateLimiter, read_json
from foureyes.server.metrics import Metrics

__all__ = [
    "AdminKey",
    "ApiError",
    "AuthMode",
    "ClientKey",
    "ErrorCode",
    "GATEWAY_MODEL",
    "Metrics",
    "Principal",
    "RateLimiter",
    "Service",
    "create_app",
    "error_response",
    "log_event",
    "read_json",
    "require_scope",
]
