"""The retention schedule of ``foureyes serve``: expired text purged every interval.

One task per instance runs :meth:`SqlTraceWriter.purge_expired
<foureyes.store.traces.SqlTraceWriter.purge_expired>` at start-up and then every
``privacy.purge_interval_s``; instances sharing one PostgreSQL database skip each other's
rows, so they may all run it. A failed purge is logged and tried again at the next
interval: retention is late then, never the reason a running server stops.
"""

from __future__ import annotations

import asyncio

from foureyes.server._logging import log_event, server_logger
from foureyes.store.traces import SqlTraceWriter

__all__ = ["purge_on_schedule"]


async def purge_on_schedule(traces: SqlTraceWriter, interval_s: float) -> None:
    """Purge expired text now and every ``interval_s`` seconds, until cancelled."""
    while True:
        try:
            counts = await traces.purge_expired()
        except Exception as exc:  # logged and retried: a purge never stops the server
            log_event(
                server_logger,
                "purge_failed",
                level="error",
                message=f"purging expired text failed; trying again in {interval_s:g} s",
                exc_info=exc,
            )
        else:
            log_event(
                server_logger,
                "purge",
                message=f"purged expired text ({counts.total} erased)",
                erased=counts.as_json(),
            )
        await asyncio.sleep(interval_s)
