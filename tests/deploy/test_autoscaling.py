"""The autoscaler's signal and the alerts, checked against a live service: the gauges the HPA reads move
with busy running slots and waiting legs, and every metric the prometheus-adapter rules and the alert
rules name is one the service exports (or kube-state-metrics'), in PromQL that Prometheus's own grammar
parses."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import make_client, run
from tests.support.polling import poll_until

from .conftest import KUBERNETES, promql_problems

MONITORING = KUBERNETES / "monitoring"
HPA = KUBERNETES / "overlays" / "sentinel" / "hpa.yaml"
#: Metrics of kube-state-metrics the alerts use (not the service's own).
KUBE_STATE_METRICS = {"kube_deployment_status_replicas_available", "kube_deployment_spec_replicas"}
#: PromQL keywords that look like series names to the scan below (functions are followed by "(").
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def gauge(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, f"{name} missing from /metrics"
    return float(found.group(1))


@pytest.mark.slow
def test_the_autoscaling_gauges_follow_busy_slots_and_waiting_legs(tmp_path: Path):
    """One running slot: a guest spinning holds it (running_slots 1 of size 1), a second cell waits for it
    (admission_queue 1); once the first is cancelled the second runs and the queue is empty again."""
    with make_client(tmp_path, workers=2, running_slots=1, burst_slots=0, acquire_timeout_ms=60000) as c:
        spin = c.post("/v1/exec", json={"code": "while (true) {}", "background": True, "timeout_ms": 60000}).json()
        assert spin["status"] == "running", spin
        poll_until(
            lambda: gauge(c.get("/metrics").text, "codemode_running_slots") == 1, "the spinning guest holds the slot"
        )
        assert gauge(c.get("/metrics").text, "codemode_running_slots_size") == 1
        second: list[dict[str, Any]] = []
        waiter = threading.Thread(target=lambda: second.append(run(c, "return 2")))
        waiter.start()
        poll_until(lambda: gauge(c.get("/metrics").text, "codemode_admission_queue") == 1, "the second cell waits")
        assert not second
        c.post(f"/v1/cells/{spin['cell_id']}/cancel")
        waiter.join(60)
        assert second and second[0]["value"] == 2, second
        text = c.get("/metrics").text
        assert gauge(text, "codemode_admission_queue") == 0


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name a running service's /metrics has."""
    with make_client(tmp_path_factory.mktemp("metrics")) as c:
        run(c, "return 1")
        text = c.get("/metrics").text
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def _adapter_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load((MONITORING / "prometheus-adapter.yaml").read_text())["rules"]
    return rules


def _alerts() -> list[dict[str, Any]]:
    [group] = yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"]
    alerts: list[dict[str, Any]] = group["rules"]
    return alerts


def _as_promql(adapter_query: str) -> str:
    """An adapter query with its template filled as the adapter would for one pod."""
    return adapter_query.replace("<<.GroupBy>>", "namespace, pod").replace(
        "<<.LabelMatchers>>", 'namespace="codemode", pod="codemode-0"'
    )


def _metric_names(expr: str) -> set[str]:
    """The series names of a PromQL expression: what is left once label matchers, ranges, grouping
    clauses, numbers and function calls are taken out."""
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return names - PROMQL_KEYWORDS


def test_the_hpa_reads_what_the_adapter_serves(exported: set[str]):
    """Every metric the HorizontalPodAutoscaler names is one an adapter rule serves, from series the service
    exports."""
    served = {rule["name"]["as"]: rule for rule in _adapter_rules()}
    hpa = yaml.safe_load(HPA.read_text())
    wanted = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    assert wanted == set(served)
    for rule in served.values():
        series = re.match(r"^(\w+)\{", rule["seriesQuery"])
        assert series and series.group(1) in exported, rule["seriesQuery"]
        assert _metric_names(_as_promql(rule["metricsQuery"])) <= exported, rule["metricsQuery"]


def test_adapter_and_alert_queries_parse_and_name_exported_metrics(exported: set[str]):
    """Each query parses with Prometheus's grammar, and names only exported (or kube-state-metrics) series."""
    queries = [_as_promql(rule["metricsQuery"]) for rule in _adapter_rules()]
    queries += [rule["seriesQuery"] for rule in _adapter_rules()]
    queries += [alert["expr"] for alert in _alerts()]
    assert promql_problems(queries) == [None] * len(queries), queries
    for alert in _alerts():
        assert _metric_names(alert["expr"]) <= exported | KUBE_STATE_METRICS, alert["alert"]
        assert alert["annotations"]["description"], alert["alert"]


def test_the_grammar_check_finds_a_broken_query():
    """The PromQL check is not vacuous: an unbalanced query and a dangling operator are reported."""
    problems = promql_problems(["sum(rate(codemode_cells_total[5m])", "codemode_admission_queue >", "up"])
    assert problems[0] is not None and problems[1] is not None and problems[2] is None


def test_the_metric_scan_finds_every_series_of_a_query():
    """The scan used above finds the series a query names, and nothing else (so a misspelt metric is caught)."""
    query = 'sum by (namespace, pod) (rate(codemode_typo_total{a="b"}[5m])) / on (pod) other_series > 1'
    assert _metric_names(query) == {"codemode_typo_total", "other_series"}
