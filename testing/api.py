"""Helpers for running the API in-process over WSGI inside a test's transaction (the
schemathesis runs)."""

from __future__ import annotations

from contextlib import contextmanager

from django.core import signals
from django.db import close_old_connections, transaction


@contextmanager
def rolled_back():
    """Each example starts from the same database, so Hypothesis can replay one it found."""
    savepoint = transaction.savepoint()
    try:
        yield
    finally:
        transaction.savepoint_rollback(savepoint)


@contextmanager
def one_connection():
    """The WSGI handler closes the database connection after each request, as Django's test
    client does not: inside the test's transaction that would lose it. Do as the client does."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
