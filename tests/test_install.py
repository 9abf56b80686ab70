"""Issue 33, done when: docs/install.md is replayed against the sandbox up to the step that needs
an image registry; both release manifests are applied there (the sandbox stores the Deployments,
Services, Secrets and RBAC, and validates the Karmada objects against the CRDs); the webhook and
the reconciler then run the way their Deployments would run them (their arguments, the mounted
ConfigMap and kubeconfig Secret as files, their ServiceAccounts' tokens and RBAC), create their
certificates and patch the caBundles, and the karmada-apiserver (the sandbox) reaches both over
TLS verified against those caBundles, by the Services' DNS names."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sandbox.server import Sandbox
from tests.conftest import REPO, require_tool
from tests.sandbox.builders import binding
from tests.sandbox.conftest import running_sandbox
from tests.waiting import eventually, eventually_value

PAGE = REPO / "docs" / "install.md"
NAMESPACE = "fleetgate-system"
REGISTRY_STEP = "### 6."  # the first step that needs an image registry
VARIABLES = {"KARMADA_KUBECONFIG", "HOST_CONTEXT", "KARMADA_SERVER", "IMAGE"}


def blocks(text: str) -> list[str]:
    """The ``sh`` blocks of the page before the step that needs a registry."""
    before = text.split(REGISTRY_STEP, 1)[0]
    return re.findall(r"```sh\n(.*?)```", before, flags=re.S)


def test_the_page_sets_its_variables_first_and_needs_the_registry_only_from_step_6() -> None:
    text = PAGE.read_text()
    assert REGISTRY_STEP + " Build and push the image" in text
    first, *rest = blocks(text)
    assert first.startswith("# set these for your install\n")
    names = {line.split("=", 1)[0].removeprefix("export ") for line in first.splitlines()[1:]}
    assert names == VARIABLES
    assert all("docker" not in block for block in rest)
    after = text.split(REGISTRY_STEP, 1)[1]
    assert "docker push" in after


def _workspace(tmp: Path) -> Path:
    """What the page's commands read, copied: ``make manifests`` writes dist/ there."""
    root = tmp / "repo"
    for name in ("deploy", "policies", "scripts"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "Makefile", root / "Makefile")
    return root


def _host_kubeconfig(sandbox: Sandbox, tmp: Path) -> Path:
    """The user's kubeconfig with a context named ``host`` (the sandbox plays the host too)."""
    path = sandbox.write_kubeconfig(tmp / "host.kubeconfig")
    config = yaml.safe_load(path.read_text())
    config["contexts"][0]["name"] = "host"
    config["current-context"] = "host"
    path.write_text(yaml.safe_dump(config))
    return path


def replay(sandbox: Sandbox, tmp: Path) -> Path:
    """Steps 1 to 5 in bash, each block with ``set -euo pipefail``; the workspace."""
    root = _workspace(tmp)
    karmada = sandbox.write_kubeconfig(tmp / "karmada-apiserver.config")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(_host_kubeconfig(sandbox, tmp)),
        "KARMADA_KUBECONFIG": str(karmada),
        "HOST_CONTEXT": "host",
        "KARMADA_SERVER": sandbox.url,
        "IMAGE": "registry.invalid/fleetgate:test",
    }
    require_tool("kubectl")
    _, *steps = blocks(PAGE.read_text())  # the first sets the variables: given above
    for block in steps:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + block],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (
            f"{block}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
    return root


class Process:
    """A fleetgate command as a child process; its output lines gathered on a thread."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.lines: list[str] = []
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fleetgate", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.log.open("a") as out:
            for line in self.process.stdout:
                self.lines.append(line.rstrip())
                out.write(line)

    def url(self, pattern: str, timeout: float = 90.0) -> str:
        """The first URL a line matching ``pattern`` (one group) announces."""

        def announced() -> str | None:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found[1]
            if self.process.poll() is not None:
                raise AssertionError(f"exited; no {pattern!r} in:\n" + "\n".join(self.lines[-40:]))
            return None

        return eventually_value(announced, timeout, f"a line matching {pattern!r}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(5)


def as_the_pod_runs_it(
    sandbox: Sandbox, name: str, tmp: Path, pod: str, listen: dict[str, str]
) -> list[str]:
    """The arguments of Deployment ``name``'s container as its pod runs them: ``$(VAR)`` from
    the container's env (``metadata.name`` is ``pod``), each mounted ConfigMap and Secret written
    out as files (read from the sandbox, where step 4 and 5 put them), an emptyDir as a fresh
    directory; ``listen`` replaces (or adds) the listening flags: 127.0.0.1 and free ports."""
    deployment = sandbox.store.get("deployments.apps", name, namespace=NAMESPACE)
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    where: dict[str, str] = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        local = tmp / pod / mount["name"]
        local.mkdir(parents=True)
        if "configMap" in volume:
            found = sandbox.store.get(
                "configmaps", volume["configMap"]["name"], namespace=NAMESPACE
            )
            for key, value in found["data"].items():
                (local / key).write_text(value)
        elif "secret" in volume:
            found = sandbox.store.get(
                "secrets", volume["secret"]["secretName"], namespace=NAMESPACE
            )
            for key, value in found["data"].items():
                (local / key).write_bytes(base64.b64decode(value))
        where[mount["mountPath"]] = str(local)
    env: dict[str, str] = {}
    for item in container.get("env", []):
        field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        env[item["name"]] = pod if field == "metadata.name" else item.get("value", "")
    args = []
    for arg in container["args"]:
        flag, _, value = arg.partition("=")
        if flag.removeprefix("--") in listen:
            arg = f"{flag}={listen[flag.removeprefix('--')]}"
        else:
            value = re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], value)
            for path, local in sorted(where.items(), key=lambda kv: -len(kv[0])):
                if value == path or value.startswith(path + "/"):
                    value = local + value[len(path) :]
                    break
            arg = f"{flag}={value}" if value else flag
        args.append(arg)
    given = {arg.partition("=")[0].removeprefix("--") for arg in args}
    return args + [f"--{flag}={value}" for flag, value in listen.items() if flag not in given]


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox() as server:
        yield server


def _ca_bundle(sandbox: Sandbox, secret: str) -> str:
    found = sandbox.store.get("secrets", secret, namespace=NAMESPACE)
    assert found["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "fleetgate"
    return found["data"]["ca.crt"]


def _raw(kubeconfig: Path, path: str) -> tuple[int, str]:
    done = subprocess.run(
        [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), "get", "--raw", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout if done.returncode == 0 else done.stderr


def test_install_then_run_as_the_deployments_do(sandbox: Sandbox, tmp_path: Path) -> None:
    root = replay(sandbox, tmp_path)
    # make manifests wrote both files, with the image named
    assert "image: registry.invalid/fleetgate:test" in (root / "dist/fleetgate.yaml").read_text()
    # what steps 4 and 5 stored: the host part, the karmada-apiserver part, the credentials
    for kind, name in (
        ("deployments.apps", "fleetgate-webhook"),
        ("deployments.apps", "fleetgate-reconciler"),
        ("services", "fleetgate-webhook"),
        ("poddisruptionbudgets.policy", "fleetgate-webhook"),
        ("configmaps", "fleetgate-policies"),
        ("secrets", "fleetgate-webhook-kubeconfig"),
        ("secrets", "fleetgate-reconciler-kubeconfig"),
        ("serviceaccounts", "fleetgate-webhook"),
        ("roles.rbac.authorization.k8s.io", "fleetgate-webhook-certificate"),
    ):
        assert sandbox.store.get(kind, name, namespace=NAMESPACE)["metadata"]["name"] == name
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        sandbox.store.get(f"{kind}.admissionregistration.k8s.io", "fleetgate")
    with pytest.raises(Exception, match="not found"):  # no certificate before the pods run
        sandbox.store.get("secrets", "fleetgate-webhook-tls", namespace=NAMESPACE)

    webhook = Process(
        as_the_pod_runs_it(
            sandbox, "fleetgate-webhook", tmp_path, "fleetgate-webhook-0",
            {"host": "127.0.0.1", "port": "0"},
        ),
        tmp_path / "webhook.log",
    )  # fmt: skip
    reconciler = Process(
        as_the_pod_runs_it(
            sandbox, "fleetgate-reconciler", tmp_path, "fleetgate-reconciler-0",
            {"host": "127.0.0.1", "tls-host": "127.0.0.1", "port": "0", "visibility-port": "0"},
        ),
        tmp_path / "reconciler.log",
    )  # fmt: skip
    try:
        hook_url = webhook.url(r"serving (https://127\.0\.0\.1:\d+)")
        visibility_url = reconciler.url(r"visibility: (https://127\.0\.0\.1:\d+)")
        # the cluster DNS the karmada-apiserver has: the Services' names to where they listen
        for service, url in (
            ("fleetgate-webhook", hook_url),
            ("fleetgate-visibility", visibility_url),
        ):
            port = int(url.rsplit(":", 1)[1])
            sandbox.hosts[(f"{service}.{NAMESPACE}.svc", 443)] = ("127.0.0.1", port)

        # the certificates, made into their Secrets, and every caBundle patched to their CA
        webhook_ca = _ca_bundle(sandbox, "fleetgate-webhook-tls")
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            found = sandbox.store.get(f"{kind}.admissionregistration.k8s.io", "fleetgate")
            assert {h["clientConfig"]["caBundle"] for h in found["webhooks"]} == {webhook_ca}
        visibility_ca = _ca_bundle(sandbox, "fleetgate-visibility-tls")
        service = sandbox.store.get(
            "apiservices.apiregistration.k8s.io", "v1alpha1.visibility.fleetgate.io"
        )
        assert service["spec"]["caBundle"] == visibility_ca != webhook_ca

        # the API server calls the webhook over TLS verified against the injected CA: a new
        # binding is held
        sandbox.store.create("namespaces", {"metadata": {"name": "team-a"}})
        held = sandbox.store.create("resourcebindings.work.karmada.io", binding("job", "team-a"))
        assert held["spec"]["suspension"]["scheduling"] is True

        # and reaches the visibility API the same way, as the admin's kubectl asks it
        admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
        answers: list[tuple[int, str]] = []

        def listed() -> bool:  # once the reconciler's first pass is in
            answers.append(_raw(admin, "/apis/visibility.fleetgate.io/v1alpha1/queues"))
            return answers[-1][0] == 0

        eventually(listed, 60, "the queues through the aggregated API", lambda: answers[-1])
        out = answers[-1][1]
        assert json.loads(out)["kind"] == "QueueList"
    finally:
        webhook.stop()
        reconciler.stop()


def test_the_committed_release_manifests_are_rendered_from_deploy(tmp_path: Path) -> None:
    """dist/ is what `make manifests` writes from deploy/ now (run it after editing deploy/)."""
    require_tool("kubectl")
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "manifests.sh"), "fleetgate:0.1.0", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rendered = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert rendered == sorted(p.name for p in (REPO / "dist").glob("*.yaml"))
    for name in rendered:
        assert (tmp_path / name).read_text() == (REPO / "dist" / name).read_text(), (
            f"dist/{name} is stale: run make manifests"
        )
