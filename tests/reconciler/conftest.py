"""The sandbox fixtures (a real HTTPS API server per test, and a client for it), reused."""

from __future__ import annotations

from tests.sandbox.conftest import api_client, kubeconfig, sandbox

__all__ = ["api_client", "kubeconfig", "sandbox"]
