"""The sandbox's client fixtures, for the dashboard's tests (as tests/reconciler's have them)."""

from tests.sandbox.conftest import api_client, kubeconfig

__all__ = ["api_client", "kubeconfig"]
