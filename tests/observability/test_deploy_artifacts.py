"""The Grafana dashboard and the Prometheus alert rules in deploy/ only query metrics the
service exports, so renaming a metric cannot silently blank a panel or disarm an alert.
(`promtool check rules` / `promtool test rules` in `.ci/run` check the rules' syntax and
behaviour.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from service.observability import DOMAIN_METRICS, RUNTIME_METRICS, Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC_NAME = re.compile(r"\b(?:mneme|process|python)_[a-z_]+\b")
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
    "info": ("_info",),
}


def exported_series() -> set[str]:
    names: set[str] = set()
    registry: CollectorRegistry
    for registry in (Metrics().registry, DOMAIN_METRICS.registry, RUNTIME_METRICS):
        for family in registry.collect():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "mneme-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def rule_expressions() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "mneme-alerts.yaml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_every_dashboard_panel_queries_exported_metrics() -> None:
    exported = exported_series()
    expressions = dashboard_expressions()
    assert len(expressions) >= 15
    for expression in expressions:
        used = set(METRIC_NAME.findall(expression))
        assert used, expression
        assert used <= exported, used - exported


def test_every_alert_rule_queries_exported_metrics() -> None:
    exported = exported_series()
    alerts = rule_expressions()
    assert alerts
    for expression in alerts:
        assert set(METRIC_NAME.findall(expression)) <= exported, expression


def test_the_dashboard_covers_every_domain_metric() -> None:
    queried = {name for e in dashboard_expressions() for name in METRIC_NAME.findall(e)}
    for family in DOMAIN_METRICS.registry.collect():
        assert any(name.startswith(family.name) for name in queried), family.name


def test_every_alert_has_a_runbook_that_exists() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "mneme-alerts.yaml").read_text())
    operating = (DEPLOY.parent / "docs" / "operating.md").read_text()
    headings = {
        line.removeprefix("### ").strip().lower()
        for line in operating.splitlines()
        if line.startswith("### ")
    }
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert len(alerts) >= 9
    for alert in alerts:
        url = alert["annotations"]["runbook_url"]
        assert url == f"docs/operating.md#{alert['alert'].lower()}", alert["alert"]
        assert alert["alert"].lower() in headings, alert["alert"]
