"""deploy/kubernetes/: every overlay renders with kubectl and validates, strictly (no unknown field), against
the schemas of every Kubernetes version we support; the numbers in it agree with the service's settings.

Supported: Kubernetes 1.31 to 1.37 (the user-namespaces component: 1.33 on, where user namespaces are on
by default).  What this cannot show (no cluster here): that a pod starts, schedules and drains on a real
node; docs/operations/deploy.md says so.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from service.assembly import redis_ha
from service.http.server import GRACEFUL_SHUTDOWN_SECONDS
from service.settings import MiB
from service.settings_load import load_settings
from service.stores.redis_target import redis_target

from .conftest import KUBERNETES, render

VERSIONS = tuple(f"1.{minor}.0" for minor in range(31, 38))
USERNS_VERSIONS = tuple(v for v in VERSIONS if int(v.split(".")[1]) >= 33)
#: Closing the worker pool, the stores and the MCP connections after the server stopped.
CLOSE_MARGIN_SECONDS = 5
#: The memory one worker process may hold besides its guest heaps (interpreter, engine, pipes).
WORKER_BYTES = 32 * MiB
#: The service process itself: the event loop's buffers, event logs, held bytes of live cells.
SERVICE_BYTES = 512 * MiB
OVERLAYS = {
    "single": KUBERNETES / "overlays" / "single",
    "sentinel": KUBERNETES / "overlays" / "sentinel",
    "sentinel+user-namespaces": KUBERNETES / "overlays" / "sentinel-user-namespaces",
}


@pytest.fixture(scope="module")
def rendered(kubectl: Path) -> dict[str, list[dict[str, Any]]]:
    """Each overlay, rendered."""
    return {name: render(kubectl, path) for name, path in OVERLAYS.items()}


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [doc for doc in docs if doc["kind"] == kind]
    return found


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [main] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return main


def environment(docs: list[dict[str, Any]], pod_ip: str = "10.1.2.3") -> dict[str, str]:
    """The CODEMODE_* variables the container gets: its ConfigMap and Secret sources, then its own env."""
    import base64

    main = container(docs)
    env: dict[str, str] = {}
    for source in main.get("envFrom", []):
        if "configMapRef" in source:
            env.update(_named(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            data = _named(docs, "Secret", source["secretRef"]["name"])["data"]
            env.update({k: base64.b64decode(v).decode() for k, v in data.items()})
    own = {"POD_IP": pod_ip}
    for item in main["env"]:
        if "value" in item:
            own[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: own[m.group(1)], item["value"])
    env.update(own)
    return {k: v for k, v in env.items() if k.startswith("CODEMODE_")}


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize(
    ("overlay", "version"),
    [(name, v) for name in ("single", "sentinel") for v in VERSIONS]
    + [("sentinel+user-namespaces", v) for v in USERNS_VERSIONS],
)
def test_every_overlay_validates_strictly_for_every_supported_version(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, version: str
):
    """Each rendered document matches its kind's schema of that Kubernetes version, no unknown field allowed."""
    docs = rendered[overlay]
    assert {doc["kind"] for doc in docs} >= {"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_what_an_api_server_would(rendered: dict[str, list[dict[str, Any]]]):
    """A misspelt field and a wrong type in the Deployment are refused: the check above can fail."""
    deployment = one(rendered["single"], "Deployment")
    misspelt = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError, match="replica"):
        kubernetes_validate.validate(misspelt, VERSIONS[0], strict=True)
    wrong = {**deployment, "spec": {**deployment["spec"], "replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[-1], strict=True)


@pytest.mark.parametrize("overlay", ["single", "sentinel", "sentinel+user-namespaces"])
def test_the_settings_the_pod_gets_load_and_check(rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path):
    """The ConfigMap, Secrets and env of the pod, with the mounted config file, are settings the service
    accepts as `codemode serve --host 0.0.0.0` (the image's command) would read them."""
    docs = rendered[overlay]
    import base64

    config = _named(
        docs, "Secret", one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
    )
    path = tmp_path / "config.toml"
    path.write_bytes(base64.b64decode(config["data"]["config.toml"]))
    assert tomllib.loads(path.read_text())["api_keys"], "binding 0.0.0.0 needs API keys"
    env = environment(docs)
    settings = load_settings(environ=env, config_path=str(path), overrides={"host": "0.0.0.0", "port": 8000})
    assert settings.resolved_advertise_url == "http://10.1.2.3:8000"
    if overlay == "single":
        assert settings.resolved_store_url == "sqlite:////var/lib/codemode/store.sqlite3"  # on the claim
    else:
        target = redis_target(settings.resolved_store_url, redis_ha(settings))
        assert len(target.sentinels) == 3 and target.wait_replicas == 1
    if overlay.endswith("user-namespaces"):
        assert settings.sandbox == "strict"


@pytest.mark.parametrize("overlay", ["single", "sentinel"])
def test_pod_resources_match_the_worker_settings(rendered: dict[str, list[dict[str, Any]]], overlay: str):
    """Guaranteed QoS; one CPU per running slot; memory for the service, every worker process it may start,
    the guests that run at once at their largest heap, and every parked heap (deploy.md, "Sizing")."""
    docs = rendered[overlay]
    resources = container(docs)["resources"]
    assert resources["requests"] == resources["limits"]
    env = environment(docs)
    assert _cpus(resources["limits"]["cpu"]) == int(env["CODEMODE_RUNNING_SLOTS"])
    slots = int(env["CODEMODE_RUNNING_SLOTS"]) + int(env["CODEMODE_BURST_SLOTS"])
    needed = (
        SERVICE_BYTES
        + int(env["CODEMODE_MAX_WORKERS"]) * WORKER_BYTES
        + slots * int(env["CODEMODE_MAX_MEMORY_LIMIT_BYTES"])
        + int(env["CODEMODE_MAX_PARKED_CELLS"]) * int(env["CODEMODE_MAX_SNAPSHOT_BYTES"])
    )
    assert _bytes(resources["limits"]["memory"]) >= needed, (resources, needed / MiB)


@pytest.mark.parametrize("overlay", ["single", "sentinel"])
def test_the_grace_period_covers_the_drain(rendered: dict[str, list[dict[str, Any]]], overlay: str):
    """terminationGracePeriodSeconds >= the preStop pause + drain_seconds + the server's graceful stop +
    closing: SIGKILL never cuts a drain short."""
    docs = rendered[overlay]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    command = container(docs)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    drain = int(environment(docs)["CODEMODE_DRAIN_SECONDS"])
    assert (
        pod["terminationGracePeriodSeconds"]
        >= int(command[1]) + drain + GRACEFUL_SHUTDOWN_SECONDS + CLOSE_MARGIN_SECONDS
    )


@pytest.mark.parametrize("overlay", ["single", "sentinel"])
def test_selectors_probes_and_targets_name_what_exists(rendered: dict[str, list[dict[str, Any]]], overlay: str):
    """The Service, the PodDisruptionBudget and the spread constraint select the pods; probes use the named
    port and the service's own routes; the autoscaler (sentinel) scales the Deployment."""
    docs = rendered[overlay]
    deployment = one(docs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert one(docs, "Service")["spec"]["selector"].items() <= labels.items()
    assert one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [spread] = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"].items() <= labels.items()
    main = container(docs)
    assert [p["name"] for p in main["ports"]] == ["http"]
    probes = {kind: main[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {p["port"] for p in probes.values()} == {"http"}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz?store=optional"
    if overlay == "sentinel":
        hpa = one(docs, "HorizontalPodAutoscaler")
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "codemode"}
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    else:
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one SQLite writer at a time
        [claim] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert _named(docs, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
        [mount] = [m for m in main["volumeMounts"] if m["name"] == claim["name"]]
        assert mount["mountPath"] == environment(docs)["CODEMODE_DATA_DIR"]  # the SQLite file is on the claim


@pytest.mark.parametrize("overlay", ["single", "sentinel"])
def test_the_pod_meets_the_restricted_pod_security_standard(rendered: dict[str, list[dict[str, Any]]], overlay: str):
    """Non-root, no privilege escalation, every capability dropped, the runtime's seccomp profile."""
    docs = rendered[overlay]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False and "hostUsers" not in pod
    ctx = container(docs)["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}


def test_the_user_namespaces_component_gives_root_only_inside_the_pod(rendered: dict[str, list[dict[str, Any]]]):
    """hostUsers: false (the pod's root is an unprivileged node user), the few capabilities the workers'
    confinement needs, and sandbox = strict so a missing layer stops the replica."""
    docs = rendered["sentinel+user-namespaces"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False and pod["securityContext"]["runAsUser"] == 0
    ctx = container(docs)["securityContext"]
    assert sorted(ctx["capabilities"]["add"]) == ["SETGID", "SETPCAP", "SETUID", "SYS_ADMIN"]
    assert ctx["allowPrivilegeEscalation"] is False


def _cpus(text: str) -> float:
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _bytes(text: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)
