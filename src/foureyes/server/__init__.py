"""HTTP service (FastAPI)."""
