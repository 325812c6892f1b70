"""Alembic environment: migrations run only on the connection ``Store.open`` hands over."""

from alembic import context

from foureyes.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise RuntimeError("foureyes migrations run through Store.open, on a live connection")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
