"""The shipped monitoring (deploy/monitoring/, and the chart's `monitoring:`
templates): the alert rules pass `promtool check rules` and their unit tests
(`promtool test rules`), deploy/monitoring holds what the chart renders with
its default values, every metric a rule or the dashboard reads is one the
workers serve, and docs/operations.md explains every alert.

promtool is built from its Go module, pinned below, into the same cache as
helm (tests/unit/test_helm_chart.py) and reused while it reports the pinned
version. The first build needs the Go toolchain and the Go module proxy and
takes several minutes on 2 cores.

To rewrite deploy/monitoring/rules.yaml, prometheus-rule.yaml and
grafana-dashboard.json from the chart after changing its templates or
files/grafana-dashboard.json: REDSTRING_WRITE_MONITORING=1 pytest this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.unit.test_helm_chart import KUBE_VERSION, _tools_bin, go_install, helm, render
from tests.unit.test_metrics_docs import OPERATIONS, served_series

PROMTOOL_MODULE = "github.com/prometheus/prometheus/cmd/promtool"
# Prometheus 3.x is published as Go module versions v0.3XY.Z for release 3.XY.Z.
PROMTOOL_MODULE_VERSION = "v0.316.0"
PROMTOOL_VERSION = "3.16.0"

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "redstring"
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "rules.yaml"
RULES_TEST = MONITORING / "rules.test.yaml"
PROMETHEUS_RULE = MONITORING / "prometheus-rule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
CHART_DASHBOARD = CHART / "files" / "grafana-dashboard.json"

#: The release deploy/monitoring is rendered for: its job is "redstring-metrics".
RELEASE = "redstring"
NAMESPACE = "streaming"

RULES_HEADER = """\
# The alerts of docs/operations.md ("Alerts") as a Prometheus rule file:
# helm/redstring/templates/prometheusrule.yaml rendered with the chart's default
# values for a release named redstring (job="redstring-metrics", the job its
# ServiceMonitor gives the workers). Do not edit: change the template and run
#   REDSTRING_WRITE_MONITORING=1 .venv/bin/pytest tests/unit/test_monitoring.py
# Tested by rules.test.yaml (promtool test rules).
"""
PROMETHEUS_RULE_HEADER = """\
# The alerts as a prometheus-operator PrometheusRule, for a cluster without the
# chart: the chart's rendering (monitoring.prometheusRule.enabled) for a release
# named redstring. Do not edit: regenerate as rules.yaml says.
"""


# --- promtool -------------------------------------------------------------------


def _promtool_version(binary: Path) -> str | None:
    try:
        result = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60
        )
    except OSError:
        return None
    found = re.search(r"promtool, version (\S+)", result.stdout + result.stderr)
    return found.group(1) if result.returncode == 0 and found else None


@cache
def promtool_binary() -> Path:
    binary = _tools_bin() / "promtool"
    if binary.exists() and _promtool_version(binary) == PROMTOOL_VERSION:
        return binary
    go = shutil.which("go")
    if go is None:
        pytest.skip(
            f"promtool {PROMTOOL_VERSION} is not in {binary.parent} and cannot be built: "
            "no Go toolchain on PATH"
        )
    # Release builds set the version by linker flag; without it the binary cannot
    # tell the cache check above which release it is.
    ldflags = f"-X github.com/prometheus/common/version.Version={PROMTOOL_VERSION}"
    go_install(go, f"{PROMTOOL_MODULE}@{PROMTOOL_MODULE_VERSION}", ldflags, binary, timeout=3600)
    assert _promtool_version(binary) == PROMTOOL_VERSION
    return binary


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool_binary()), *args], capture_output=True, text=True, timeout=300
    )


# --- what the chart renders -------------------------------------------------------


def rendered(*sets: str, release: str = RELEASE) -> list[dict[str, Any]]:
    args = ["template", release, str(CHART), "--namespace", NAMESPACE]
    args += ["--kube-version", KUBE_VERSION]
    for item in ("monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true"):
        args += ["--set", item]
    for item in sets:
        args += ["--set", item]
    return [doc for doc in yaml.safe_load_all(helm(*args).stdout) if doc]


def rendered_text(template: str) -> str:
    """One template's output for deploy/monitoring, as written."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += ["--kube-version", KUBE_VERSION, "--show-only", f"templates/{template}"]
    args += ["--set", "monitoring.prometheusRule.enabled=true"]
    return helm(*args).stdout


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def dashboard_config_map(docs: list[dict[str, Any]]) -> Any:
    """The dashboard's ConfigMap (the chart's other one holds the settings), or None."""
    found = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")
    ]
    assert len(found) <= 1
    return found[0] if found else None


def rules_file_text() -> str:
    """rules.yaml as the chart renders it: the PrometheusRule's spec, unindented."""
    lines = rendered_text("prometheusrule.yaml").splitlines()
    body = lines[lines.index("spec:") + 1 :]
    return RULES_HEADER + "\n".join(line.removeprefix("  ") for line in body) + "\n"


def prometheus_rule_text() -> str:
    """prometheus-rule.yaml: the chart's PrometheusRule, with labels of its own."""
    lines = rendered_text("prometheusrule.yaml").splitlines()
    metadata = [
        "apiVersion: monitoring.coreos.com/v1",
        "kind: PrometheusRule",
        "metadata:",
        "  name: redstring",
        "  labels:",
        "    app.kubernetes.io/name: redstring",
        "    app.kubernetes.io/part-of: redstring",
    ]
    return PROMETHEUS_RULE_HEADER + "\n".join(metadata + lines[lines.index("spec:") :]) + "\n"


def alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


# --- deploy/monitoring is the chart's rendering --------------------------------------


def test_deploy_monitoring_holds_what_the_chart_renders() -> None:
    expected = {
        RULES: rules_file_text(),
        PROMETHEUS_RULE: prometheus_rule_text(),
        DASHBOARD: CHART_DASHBOARD.read_text(),
    }
    if os.environ.get("REDSTRING_WRITE_MONITORING"):
        for path, text in expected.items():
            path.write_text(text)
    for path, text in expected.items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} differs from the chart's rendering: "
            "REDSTRING_WRITE_MONITORING=1 .venv/bin/pytest tests/unit/test_monitoring.py"
        )


def test_the_prometheus_rule_carries_the_groups_of_the_rules_file() -> None:
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


# --- the chart's objects ---------------------------------------------------------------

DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)(y|w|d|h|m|s|ms))+)$"}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
#: What the chart writes of prometheus-operator's PrometheusRule, after its CRD
#: (monitoring.coreos.com/v1): kubernetes-validate has no schema for it.
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "labels": STRINGS},
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["alert", "expr"],
                                    "properties": {
                                        "alert": {"type": "string", "minLength": 1},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": DURATION,
                                        "labels": STRINGS,
                                        "annotations": STRINGS,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


@pytest.mark.parametrize("all_on", [False, True], ids=["monitoring-on", "all-on"])
def test_the_prometheus_rule_fits_its_crd(all_on: bool) -> None:
    docs = render(all_on=True) if all_on else rendered()
    rule = of_kind(docs, "PrometheusRule")
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    if all_on:
        assert rule["metadata"]["labels"]["release"] == "prometheus"
        for alert in alerts(rule["spec"]["groups"]).values():
            assert 'namespace="streaming",service="rs-test-redstring-metrics"' in alert["expr"]
            assert alert["labels"]["team"] == "data"


def test_monitoring_is_off_by_default() -> None:
    kinds = {doc["kind"] for doc in render()}
    assert "PrometheusRule" not in kinds
    assert dashboard_config_map(render()) is None


def test_the_dashboard_config_map_goes_where_the_sidecar_looks() -> None:
    configmap = dashboard_config_map(render(all_on=True))
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "redstring"}
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"


# --- promtool ------------------------------------------------------------------------


def test_promtool_is_the_pinned_build_outside_the_repository() -> None:
    assert _promtool_version(promtool_binary()) == PROMTOOL_VERSION
    assert ROOT not in promtool_binary().parents


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts(yaml.safe_load(RULES.read_text())['groups']))} rules found" in (
        result.stdout
    )


def test_promtool_checks_the_rules_with_other_values(tmp_path: Path) -> None:
    """Another selector, thresholds and labels still make valid rules."""
    rule = of_kind(
        rendered(
            'monitoring.prometheusRule.selector=namespace="data"\\,app="rs"',
            "monitoring.prometheusRule.alerts.deadLetters.perSecond=2.5",
            "monitoring.prometheusRule.alerts.lagGrowing.for=1h",
            "monitoring.prometheusRule.alertLabels.team=data",
            release="other",
        ),
        "PrometheusRule",
    )
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    for rule_ in alerts(rule["spec"]["groups"]).values():
        assert 'namespace="data",app="rs"' in rule_["expr"]
        assert rule_["labels"]["team"] == "data"


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    result = promtool("test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    names = set(alerts(yaml.safe_load(RULES.read_text())["groups"]))
    fired, quiet = set(), set()
    for case in yaml.safe_load(RULES_TEST.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert fired == names and quiet == names


# --- the metric names the rules and the dashboard read ------------------------------

PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "group_left", "group_right"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (Grafana's variables allowed)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    bare = re.sub(r"\{[^}]*\}", "", bare)  # matchers
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    names = set()
    for found in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", bare):
        word, call = found.groups()
        if not call and word not in PROMQL_WORDS:
            names.add(word)
    return names


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = []
    for panel in dashboard["panels"]:
        exprs += [target["expr"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable.get("type") == "query":
            query = variable["query"]
            query = query["query"] if isinstance(query, dict) else query
            # label_values(metric, label): Grafana's, not PromQL; the metric is read.
            label_values = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query)
            exprs.append(label_values.group(1) if label_values else query)
    return exprs


def test_the_name_extraction_sees_through_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(redstring_batch_seconds_bucket{job=~"$job"}'
        "[$__rate_interval]))) > on (job) group_left up and max without (instance) (x_total)"
    )
    assert metric_names(expr) == {"redstring_batch_seconds_bucket", "up", "x_total"}


def test_the_rules_read_only_metrics_the_workers_serve() -> None:
    served = served_series() | {"up"}
    used: set[str] = set()
    for rule in alerts(yaml.safe_load(RULES.read_text())["groups"]).values():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        used |= names
    assert used <= served, sorted(used - served)


def test_the_dashboard_reads_only_metrics_the_workers_serve() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    served = served_series() | {"up"}
    used = set().union(*(metric_names(expr) for expr in dashboard_exprs(dashboard)))
    assert used <= served, sorted(used - served)
    # What the dashboard is for (the list): each has a panel.
    for needed in (
        "redstring_events_applied_total",  # throughput
        "redstring_consumer_lag",
        "redstring_store_lag_records",
        "redstring_batch_seconds_bucket",
        "redstring_events_dead_lettered_total",
        "redstring_store_retries_total",
        "redstring_partition_paused",
        "redstring_rebuild_windows_open",
        "redstring_rebuild_window_age_seconds",
        "process_resident_memory_bytes",
    ):
        assert needed in used, needed


def test_the_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    configmap = dashboard_config_map(rendered())
    assert configmap["metadata"]["name"] == f"{RELEASE}-dashboard"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["redstring-workers.json"]) == dashboard
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]


# --- docs/operations.md explains every alert -------------------------------------------


def test_the_operations_guide_explains_every_alert() -> None:
    text = OPERATIONS.read_text()
    headings = set(re.findall(r"^### (Redstring\w+)$", text, re.MULTILINE))
    assert headings == set(alerts(yaml.safe_load(RULES.read_text())["groups"]))
