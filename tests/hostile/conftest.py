"""Fixtures of tests/hostile: the webhook's (``client`` and what it is built from)."""

from tests.webhook.conftest import (  # noqa: F401 (re-exported fixtures)
    client,
    fleet,
    holder,
    make_app,
    policy_dir,
    shared_server,
)
