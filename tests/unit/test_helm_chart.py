"""helm/redstring: `helm lint` and `helm template` for the default values and for
ci/all-on-values.yaml, every rendered object validated offline against the
Kubernetes JSON schemas (kubernetes-validate ships them), and the promises the
chart makes checked on the rendered objects.

The helm CLI is built from its Go module, pinned below, into a cache outside the
repository (~/.cache/redstring/bin, or $REDSTRING_TOOLS_BIN) and reused while it
reports the pinned version. The first build needs the Go toolchain and the Go
module proxy and takes a few minutes on 2 cores; everything after is offline.
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
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError
from pydantic import TypeAdapter

from contracts.ids import TENANT_ID_PATTERN
from streams.kafka import config as kafka_config
from streams.kafka.config import FIRST_CLASS, MECHANISMS, PROTOCOLS, client_configs, property_name
from streams.settings import Settings, check_environment

HELM_MODULE = "helm.sh/helm/v3/cmd/helm"
HELM_VERSION = "v3.22.0"
# Rendered for the oldest Kubernetes the chart supports (Chart.yaml kubeVersion)
# and the newest that kubernetes-validate has schemas for.
KUBE_VERSIONS = ("1.27.0", "1.37.0")
KUBE_VERSION = KUBE_VERSIONS[-1]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "redstring"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
RELEASE = "rs-test"
NAMESPACE = "streaming"

Manifest = dict[str, Any]

#: Settings that are a family of variables, one per key (REDSTRING_KAFKA__<property>).
FAMILIES = {
    f"REDSTRING_{name.upper()}"
    for name, field in Settings.model_fields.items()
    if field.default_factory is dict
}
#: The rest, one variable each.
SCALARS = {f"REDSTRING_{name.upper()}" for name in Settings.model_fields} - FAMILIES

# Mutual TLS without SASL: a CA, a client certificate whose key is encrypted, and
# pass-through properties.
MTLS = (
    "kafka.bootstrap=b-1.msk:9094",
    "kafka.securityProtocol=SSL",
    "kafka.tls.caSecret.name=kafka-ca",
    "kafka.tls.clientCertSecret.name=kafka-client",
    "kafka.tls.clientCertSecret.certKey=client.pem",
    "kafka.tls.clientCertSecret.keyKey=client.key",
    "kafka.tls.keyPasswordSecret.name=kafka-client-pass",
    "kafka.tls.keyPasswordSecret.key=key-password",
    r"kafka.properties.client\.id=projector",
    r"kafka.properties.request\.timeout\.ms=45000",
    r"kafka.properties.ssl\.endpoint\.identification\.algorithm=https",
    r"kafka.properties.log_level=6",
    "replay.tenant=acme",
)


def family_members(names: set[str]) -> set[str]:
    """The names that belong to a family (REDSTRING_KAFKA__CLIENT_ID)."""
    return {n for n in names if any(n.startswith(f"{family}__") for family in FAMILIES)}


# --- the helm binary ----------------------------------------------------------


def _tools_bin() -> Path:
    configured = os.environ.get("REDSTRING_TOOLS_BIN")
    return Path(configured) if configured else Path.home() / ".cache" / "redstring" / "bin"


def _reported_version(binary: Path) -> str | None:
    try:
        result = subprocess.run(
            [str(binary), "version", "--template", "{{.Version}}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


@cache
def helm_binary() -> Path:
    binary = _tools_bin() / "helm"
    if binary.exists() and _reported_version(binary) == HELM_VERSION:
        return binary
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"the Go toolchain is needed once to build helm {HELM_VERSION}")
    # helm's release builds set the version by linker flag; without it the binary
    # reports "v3.22", and the cache check above could not tell patch releases apart.
    ldflags = f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"
    go_install(go, f"{HELM_MODULE}@{HELM_VERSION}", ldflags, binary)
    assert _reported_version(binary) == HELM_VERSION
    return binary


def go_install(go: str, module: str, ldflags: str, binary: Path, timeout: int = 1800) -> None:
    """`go install module` (path@version) into the folder of ``binary``, with the
    local toolchain and the module's own go.mod (tests/unit/test_monitoring.py
    builds promtool with it too)."""
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GOBIN": str(binary.parent),
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=mod",
    }
    result = subprocess.run(
        [go, "install", f"-ldflags={ldflags}", module],
        capture_output=True,
        text=True,
        env=env,
        cwd=binary.parent,
        timeout=timeout,
    )
    assert result.returncode == 0, f"go install {module} failed:\n{result.stderr[-4000:]}"


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(helm_binary()), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HELM_CACHE_HOME": str(_tools_bin().parent / "helm-cache")},
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


@cache
def _render(
    kube_version: str, values_files: tuple[str, ...], sets: tuple[str, ...]
) -> tuple[Manifest, ...]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += ["--kube-version", kube_version]
    for path in values_files:
        args += ["--values", path]
    for item in sets:
        args += ["--set", item]
    out = helm(*args).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def render(*sets: str, all_on: bool = False, kube_version: str = KUBE_VERSION) -> list[Manifest]:
    files = (str(ALL_ON),) if all_on else ()
    return list(_render(kube_version, files, tuple(sets)))


def render_fails(*sets: str, all_on: bool = False) -> str:
    args = ["template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION]
    if all_on:
        args += ["--values", str(ALL_ON)]
    for item in sets:
        args += ["--set", item]
    result = helm(*args, check=False)
    assert result.returncode != 0, "expected the chart to refuse these values"
    return result.stderr


def by_kind(docs: list[Manifest], kind: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Manifest], kind: str, component: str | None = None) -> Manifest:
    """The one object of a kind (of a component); the read API's and the
    dashboard's objects only when asked for by their component, ``read-api`` or
    ``monitoring``."""
    found = [
        d
        for d in by_kind(docs, kind)
        if (
            component
            or d["metadata"]["labels"].get("app.kubernetes.io/component")
            not in {"read-api", "monitoring"}
        )
        and (
            component is None
            or d["metadata"]["labels"].get("app.kubernetes.io/component") == component
        )
    ]
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]


def pod_spec(obj: Manifest) -> Manifest:
    spec: Manifest = obj["spec"]["template"]["spec"]
    return spec


def container(obj: Manifest) -> Manifest:
    (only,) = pod_spec(obj)["containers"]
    result: Manifest = only
    return result


def env_of(obj: Manifest) -> dict[str, Manifest]:
    return {e["name"]: e for e in container(obj).get("env", [])}


def default_values() -> Manifest:
    values: Manifest = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


# --- helm itself ----------------------------------------------------------------


def test_helm_is_the_pinned_build() -> None:
    assert _reported_version(helm_binary()) == HELM_VERSION
    # The binary is cached outside the repository.
    assert ROOT not in helm_binary().parents


@pytest.mark.parametrize("all_on", [False, True], ids=["defaults", "all-on"])
def test_helm_lint_is_clean(all_on: bool) -> None:
    args = ["lint", str(CHART), "--strict", "--kube-version", KUBE_VERSION]
    if all_on:
        args += ["--values", str(ALL_ON)]
    result = helm(*args)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    # Lint reports a template's `fail` as INFO, and warnings without --strict.
    for word in ("Fail", "WARNING", "ERROR"):
        assert word not in result.stdout + result.stderr


VARIANTS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "defaults": (False, ()),
    "all-on": (True, ()),
    "offline-replay": (False, ("replay.tenant=acme", "replay.offline=true")),
    # No secret at all, a password-less DSN in the ConfigMap, no static ids, no extras.
    "minimal": (
        False,
        (
            "neo4j.passwordSecret.name=",
            "controlKeySecret.name=",
            "postgres.dsnSecret.name=",
            "postgres.dsn=postgresql://redstring@pg/redstring",
            "staticMembership=false",
            "podAntiAffinity=",
            "startupProbe=null",
            "metrics.service.enabled=false",
            "podDisruptionBudget.enabled=false",
            "topicsJob.enabled=false",
        ),
    ),
    "mtls": (False, MTLS),
    "keda-mtls": (False, (*MTLS, "autoscaling.keda.enabled=true")),
    "hpa": (False, ("autoscaling.hpa.enabled=true",)),
    "hpa-pods": (False, ("autoscaling.hpa.enabled=true", "autoscaling.hpa.metric.type=Pods")),
}

#: Custom resources kubernetes-validate has no schema for, checked by hand below.
CUSTOM_KINDS = {
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",  # tests/unit/test_monitoring.py
    "keda.sh/v1alpha1/ScaledObject",
    "keda.sh/v1alpha1/TriggerAuthentication",
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_rendered_manifests_are_valid_kubernetes_objects(variant: str, kube_version: str) -> None:
    all_on, sets = VARIANTS[variant]
    docs = render(*sets, all_on=all_on, kube_version=kube_version)
    assert docs
    without_schema = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except SchemaNotFoundError:
            without_schema.append(f"{doc['apiVersion']}/{doc['kind']}")
    # Only the prometheus-operator and KEDA CRDs have no built-in schema (checked
    # by hand below).
    assert set(without_schema) <= CUSTOM_KINDS
    assert bool(without_schema) == (all_on or variant == "keda-mtls")


def test_the_schema_validation_has_teeth() -> None:
    (deployment,) = by_kind(render(), "Deployment")
    broken = json.loads(json.dumps(deployment))
    container(broken)["livenessProbe"]["httpGet"]["prot"] = 6066
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSION, strict=True)


def test_kinds_rendered_by_default() -> None:
    kinds = sorted(d["kind"] for d in render())
    assert kinds == ["ConfigMap", "Deployment", "Job", "Pod", "PodDisruptionBudget", "Service"]
    (job,) = by_kind(render(), "Job")
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "topics"


def test_kinds_rendered_with_everything_on() -> None:
    kinds = sorted(d["kind"] for d in render(all_on=True))
    assert kinds == [
        "ConfigMap",
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Job",
        "Job",
        "NetworkPolicy",
        "Pod",
        "PodDisruptionBudget",
        "PrometheusRule",
        "ScaledObject",
        "Service",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "TriggerAuthentication",
    ]


# --- values.schema.json -------------------------------------------------------------


def test_values_files_satisfy_the_values_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(default_values(), schema)
    jsonschema.validate(yaml.safe_load(ALL_ON.read_text()), schema)


def test_the_all_on_values_switch_every_option_on() -> None:
    all_on = yaml.safe_load(ALL_ON.read_text())

    def switches(values: Any, path: str = "") -> dict[str, Any]:
        found: dict[str, Any] = {}
        if isinstance(values, dict):
            for key, value in values.items():
                found.update(switches(value, f"{path}{key}."))
        elif isinstance(values, bool):
            found[path.rstrip(".")] = values
        return found

    def lookup(values: Any, path: str) -> Any:
        for key in path.split("."):
            values = values[key]
        return values

    toggles = [
        path
        for path in switches(default_values())
        if path.endswith(".enabled") or path in {"staticMembership", "replay.offline"}
    ]
    assert len(toggles) >= 7
    # Online is the mode to render with everything; the HPA is KEDA's alternative.
    off = {"replay.offline", "autoscaling.hpa.enabled"}
    for path in toggles:
        expected = path not in off
        assert lookup(all_on, path) is expected, path
    # The options that are not booleans.
    for path in (
        "replay.tenant",
        "kafka.sasl.mechanism",
        "kafka.sasl.passwordSecret.name",
        "kafka.tls.caSecret.name",
        "kafka.tls.clientCertSecret.name",
        "kafka.tls.keyPasswordSecret.name",
        "kafka.properties",
        "neo4j.passwordSecret.name",
        "postgres.dsnSecret.name",
        "controlKeySecret.name",
        "image.digest",
        "serviceAccountName",
        "imagePullSecrets",
        "extraEnv",
        "extraEnvFrom",
        "extraVolumes",
        "extraVolumeMounts",
        "topologySpreadConstraints",
        "tolerations",
        "networkPolicy.egress",
        "networkPolicy.metricsFrom",
        "metrics.serviceMonitor.labels",
        "commonLabels",
        "serviceAccount.annotations",
        "podLabels",
    ):
        assert lookup(all_on, path), path
    assert all_on["podAntiAffinity"] == "hard"


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (["unknown=1"], "additional properties"),
        (["postgres.dsn=postgresql://u:hunter2@pg/db", "postgres.dsnSecret.name="], "dsn"),
        (["postgres.dsn=host=pg password=hunter2", "postgres.dsnSecret.name="], "dsn"),
        (["neo4j.uri=bolt://neo4j:hunter2@neo4j:7687"], "uri"),
        (["extraEnv[0].name=REDSTRING_NEO4J_PASSWORD", "extraEnv[0].value=x"], "extraEnv"),
        (["replay.tenant=Not A Tenant"], "tenant"),
        (["kafka.securityProtocol=TLS"], "securityProtocol"),
        (["kafka.securityProtocol=SASL_SSL", "kafka.sasl.mechanism=GSSAPI"], "mechanism"),
        (["kafka.securityProtocol=SASL_SSL", "kafka.sasl.mechanism=GSSAPI"], "mechanism"),
        # (helm names a wrong place for an invalid property name: the name is the complaint)
        ([r"kafka.properties.Client\.Id=x"], "invalid propertyName 'Client.Id'"),
        ([r"kafka.properties.client_id=x"], "invalid propertyName 'client_id'"),
        ([r"kafka.properties.client\.id[0]=x"], "/kafka/properties/client.id"),
        (["kafka.tls.clientCertSecret.name=c", "kafka.tls.clientCertSecret.certKey="], "certKey"),
        (["podAntiAffinity=always"], "podAntiAffinity"),
        (["replicaCount=-1"], "replicaCount"),
        (["autoscaling.keda.enabled=true", "autoscaling.hpa.enabled=true"], "/autoscaling"),
        (["autoscaling.keda.lagThreshold=0"], "lagThreshold"),
        (["autoscaling.hpa.metric.type=Object"], "type"),
        (["autoscaling.hpa.metric.name=redstring-lag"], "name"),
        (["autoscaling.keda.authenticationRef.kind=Secret"], "kind"),
        (["serviceAccount.automount=true"], "additional properties"),
    ],
)
def test_values_schema_refuses(sets: list[str], complaint: str) -> None:
    stderr = render_fails(*sets)
    assert "values don't meet the specifications of the schema" in stderr
    assert complaint in stderr


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (["postgres.dsnSecret.name="], "postgres.dsnSecret.name"),
        (["replay.tenant=acme", "controlKeySecret.name="], "controlKeySecret.name"),
    ],
)
def test_the_chart_refuses(sets: list[str], complaint: str) -> None:
    assert complaint in render_fails(*sets)


def test_the_values_schema_offers_what_the_kafka_clients_support() -> None:
    kafka = json.loads((CHART / "values.schema.json").read_text())["properties"]["kafka"]
    assert kafka["properties"]["securityProtocol"]["enum"] == list(PROTOCOLS)
    assert kafka["properties"]["sasl"]["properties"]["mechanism"]["enum"] == ["", *MECHANISMS]


@pytest.mark.parametrize("name", sorted(FIRST_CLASS))
def test_kafka_properties_that_have_their_own_value_are_refused(name: str) -> None:
    escaped = name.replace(".", "\\.")
    stderr = render_fails(f"kafka.properties.{escaped}=x")
    assert f"kafka.properties.{name}: set " in stderr, stderr
    assert "one source of truth" in stderr


@pytest.mark.parametrize(
    "name",
    [
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "sasl.oauthbearer.config",
    ],
)
def test_secret_kafka_properties_are_refused(name: str) -> None:
    escaped = name.replace(".", "\\.")
    stderr = render_fails(f"kafka.properties.{escaped}=hunter2")
    assert f"kafka.properties.{name} is secret" in stderr, stderr
    assert "hunter2" not in stderr


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (["kafka.securityProtocol=SASL_SSL"], "needs kafka.sasl.mechanism"),
        (["kafka.sasl.mechanism=PLAIN"], "does not use SASL"),
        (["kafka.tls.caSecret.name=ca"], "does not use TLS"),
        (
            [
                "kafka.securityProtocol=SASL_PLAINTEXT",
                "kafka.sasl.mechanism=PLAIN",
                "kafka.tls.clientCertSecret.name=c",
            ],
            "does not use TLS",
        ),
        (["kafka.securityProtocol=SSL", "kafka.tls.keyPasswordSecret.name=p"], "clientCertSecret"),
        (
            [
                "kafka.securityProtocol=SSL",
                "kafka.tls.clientCertSecret.name=c",
                "kafka.tls.clientCertSecret.keyKey=tls.crt",
            ],
            "the same key",
        ),
    ],
)
def test_the_chart_refuses_kafka_settings_the_clients_would(
    sets: list[str], complaint: str
) -> None:
    assert complaint in render_fails(*sets)


def test_values_yaml_names_the_setting_behind_every_value() -> None:
    text = (CHART / "values.yaml").read_text()
    found = re.findall(r"\[(REDSTRING_[A-Z0-9_]+?)(__<property>)?[\]=]", text)
    named = {name for name, family in found if not family}
    # The worker id is the pod's name (staticMembership), not a value.
    assert named == SCALARS - {"REDSTRING_WORKER_ID"}, SCALARS ^ named
    # A family is named as docs/deploy.md names it: [REDSTRING_KAFKA__<property>].
    assert {name for name, family in found if family} == FAMILIES


def test_the_replay_tenant_pattern_is_the_contract_s() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    pattern = schema["properties"]["replay"]["properties"]["tenant"]["pattern"]
    assert pattern == "^$|" + TENANT_ID_PATTERN.pattern


# --- the projector Deployment -------------------------------------------------------


def test_deployment_defaults() -> None:
    deployment = one(render(), "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = pod_spec(deployment)
    # SIGTERM finishes the batch in hand: longer than the 30s default.
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert pod["automountServiceAccountToken"] is False
    worker = container(deployment)
    assert worker["args"] == ["worker"]
    assert worker["image"] == "redstring:0.1.0"
    assert worker["ports"] == [{"name": "http", "containerPort": 6066, "protocol": "TCP"}]
    assert worker["resources"]["requests"] and worker["resources"]["limits"]["memory"]


#: Chart values that differ from the worker's own defaults on purpose: the
#: release's service addresses, and a topic replicated over three brokers.
DEPLOYMENT_VALUES = {"kafka_bootstrap", "neo4j_uri", "replication_factor"}


def test_the_chart_defaults_are_the_workers_defaults() -> None:
    # docs/deploy.md's table gives the worker's defaults; a chart default left
    # behind when a setting's default moves would run something else.
    data = one(render(), "ConfigMap")["data"]
    differ = {}
    for variable, value in data.items():
        name = variable.removeprefix("REDSTRING_").lower()
        field = Settings.model_fields.get(name)
        if field is None or name in DEPLOYMENT_VALUES:
            continue
        if TypeAdapter(field.annotation).validate_python(value) != field.default:
            differ[variable] = (value, field.default)
    assert not differ
    assert DEPLOYMENT_VALUES <= {v.removeprefix("REDSTRING_").lower() for v in data}


@pytest.mark.parametrize("all_on", [False, True], ids=["defaults", "all-on"])
def test_probes_hit_the_worker_endpoints(all_on: bool) -> None:
    worker = container(one(render(all_on=all_on), "Deployment"))
    assert worker["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert worker["startupProbe"]["httpGet"]["path"] == "/livez"
    port = worker["ports"][0]["containerPort"]
    config = one(render(all_on=all_on), "ConfigMap")["data"]
    assert config["REDSTRING_HTTP_PORT"] == str(port)
    assert config["REDSTRING_HTTP_HOST"] == "0.0.0.0"


def test_worker_id_is_the_pod_name_for_static_membership() -> None:
    env = env_of(one(render(), "Deployment"))
    assert env["REDSTRING_WORKER_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    off = env_of(one(render("staticMembership=false"), "Deployment"))
    assert "REDSTRING_WORKER_ID" not in off


def test_soft_pod_anti_affinity_by_default_and_hard_on_request() -> None:
    soft = pod_spec(one(render(), "Deployment"))["affinity"]["podAntiAffinity"]
    (term,) = soft["preferredDuringSchedulingIgnoredDuringExecution"]
    selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selector == one(render(), "Deployment")["spec"]["selector"]["matchLabels"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    hard = pod_spec(one(render(all_on=True), "Deployment"))["affinity"]["podAntiAffinity"]
    (required,) = hard["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["topologyKey"] == "topology.kubernetes.io/zone"
    assert "affinity" not in pod_spec(one(render("podAntiAffinity="), "Deployment"))


def test_runs_as_the_image_s_non_root_user_with_a_read_only_root() -> None:
    deployment = one(render(), "Deployment")
    pod = pod_spec(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    worker = container(deployment)
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    assert worker["securityContext"]["allowPrivilegeEscalation"] is False
    # Faust's data directory lives under /tmp: an emptyDir.
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_a_setting_change_rolls_the_workers() -> None:
    def checksum(*sets: str) -> str:
        deployment = one(render(*sets), "Deployment")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    assert checksum() != checksum("projection.batchSize=100")


def test_pod_disruption_budget_covers_the_workers() -> None:
    docs = render()
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]
    assert one(render(all_on=True), "PodDisruptionBudget")["spec"] == {
        "minAvailable": 4,
        "selector": one(render(all_on=True), "Deployment")["spec"]["selector"],
    }
    assert (
        one(render("podDisruptionBudget.minAvailable=50%"), "PodDisruptionBudget")["spec"][
            "minAvailable"
        ]
        == "50%"
    )
    assert not by_kind(render("podDisruptionBudget.enabled=false"), "PodDisruptionBudget")


# --- configuration and secrets --------------------------------------------------


SECRET_SETTINGS = {
    name for name, field in Settings.model_fields.items() if "SecretStr" in repr(field.annotation)
}


def test_the_secret_settings_are_the_ones_the_chart_references() -> None:
    assert SECRET_SETTINGS == {
        "kafka_sasl_password",
        "kafka_sasl_oauthbearer_client_secret",
        "kafka_ssl_key_password",
        "neo4j_password",
        "pg_dsn",
        "control_key",
        "control_keys",
        "serve_jwt_key",
    }


def test_every_setting_can_be_set_through_the_chart() -> None:
    docs = render(all_on=True)
    config = set(one(docs, "ConfigMap")["data"])
    env = set(env_of(one(docs, "Deployment")))
    read_api = set(env_of(one(docs, "Deployment", "read-api")))
    # The read API's key is a JWKS URL in the all-on values, or else a Secret.
    keyed = set(
        env_of(
            one(
                render("readApi.enabled=true", "readApi.auth.keySecret.name=k"),
                "Deployment",
                "read-api",
            )
        )
    )
    assert SCALARS <= config | env | read_api | keyed, SCALARS - (config | env | read_api | keyed)
    assert read_api <= SCALARS | {"TZ"}, read_api - SCALARS
    members = family_members(config)
    for family in FAMILIES:
        assert any(name.startswith(f"{family}__") for name in members), family
    # and nothing else: the workers refuse an unknown REDSTRING_* variable at start.
    assert config - members <= SCALARS, config - members - SCALARS
    # The pass-through variables are exactly the properties asked for.
    asked = yaml.safe_load(ALL_ON.read_text())["kafka"]["properties"]
    passed = {property_name(n.removeprefix("REDSTRING_KAFKA__")) for n in members}
    assert passed == set(asked)


def test_the_nothing_else_check_catches_a_misspelt_key() -> None:
    config = {"REDSTRING_KAFKA__CLIENT_ID", "REDSTRING_KAFKA_SSL_CERTFIEL", "REDSTRING_KAFKA_"}
    assert config - family_members(config) - SCALARS == {
        "REDSTRING_KAFKA_SSL_CERTFIEL",
        "REDSTRING_KAFKA_",
    }


def test_no_secret_value_in_the_config_map_or_in_plain_env() -> None:
    for all_on in (False, True):
        docs = render(all_on=all_on)
        config = one(docs, "ConfigMap")["data"]
        for name in SECRET_SETTINGS:
            assert f"REDSTRING_{name.upper()}" not in config
        assert "PGPASSWORD" not in config
        for obj in by_kind(docs, "Deployment") + by_kind(docs, "Job"):
            for entry in container(obj).get("env", []):
                secretish = re.search(r"PASSWORD|_DSN$|CONTROL_KEYS?$", entry["name"])
                if secretish:
                    assert "value" not in entry, f"{entry['name']} in clear"
                    assert set(entry["valueFrom"]) == {"secretKeyRef"}
    assert not by_kind(render(all_on=True), "Secret")  # the chart never creates one


def test_secrets_are_referenced_from_existing_secrets() -> None:
    env = env_of(one(render(all_on=True), "Deployment"))
    expected = {
        "REDSTRING_KAFKA_SASL_PASSWORD": ("redstring-kafka", "sasl-password"),
        "REDSTRING_KAFKA_SSL_KEY_PASSWORD": ("redstring-kafka-client-key", "password"),
        "REDSTRING_NEO4J_PASSWORD": ("redstring-neo4j", "password"),
        "REDSTRING_PG_DSN": ("redstring-pg", "dsn"),
        "REDSTRING_CONTROL_KEY": ("redstring-control", "control-key"),
    }
    for name, (secret, key) in expected.items():
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": secret, "key": key}
    defaults = env_of(one(render(), "Deployment"))
    assert "REDSTRING_KAFKA_SASL_PASSWORD" not in defaults
    assert "REDSTRING_KAFKA_SSL_KEY_PASSWORD" not in defaults
    assert defaults["REDSTRING_PG_DSN"]["valueFrom"]["secretKeyRef"]["name"] == (
        "redstring-postgres"
    )


def test_a_dsn_without_password_plus_a_password_secret() -> None:
    docs = render(
        "postgres.dsnSecret.name=",
        "postgres.dsn=postgresql://redstring@pg:5432/redstring?sslmode=verify-full",
        "postgres.passwordSecret.name=pg-auth",
    )
    assert one(docs, "ConfigMap")["data"]["REDSTRING_PG_DSN"].startswith("postgresql://redstring@")
    env = env_of(one(docs, "Deployment"))
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "pg-auth", "key": "password"}
    assert "REDSTRING_PG_DSN" not in env


def test_kafka_ca_is_mounted_from_a_secret_and_passed_as_a_file() -> None:
    deployment = one(render(all_on=True), "Deployment")
    config = one(render(all_on=True), "ConfigMap")["data"]
    path = Path(config["REDSTRING_KAFKA_SSL_CAFILE"])
    mounts = {m["mountPath"]: m for m in container(deployment)["volumeMounts"]}
    mount = mounts[str(path.parent)]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod_spec(deployment)["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "kafka-ca"
    assert volume["secret"]["items"] == [{"key": "ca.crt", "path": path.name}]
    assert config["REDSTRING_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert config["REDSTRING_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    # Without a CA Secret the clients use the image's system trust store.
    assert "REDSTRING_KAFKA_SSL_CAFILE" not in one(render(), "ConfigMap")["data"]


def test_mutual_tls_mounts_the_client_certificate_in_every_pod() -> None:
    docs = render(*MTLS)
    config = one(docs, "ConfigMap")["data"]
    assert config["REDSTRING_KAFKA_SECURITY_PROTOCOL"] == "SSL"
    assert "REDSTRING_KAFKA_SASL_MECHANISM" not in config
    certfile = Path(config["REDSTRING_KAFKA_SSL_CERTFILE"])
    keyfile = Path(config["REDSTRING_KAFKA_SSL_KEYFILE"])
    cafile = Path(config["REDSTRING_KAFKA_SSL_CAFILE"])
    assert (certfile.name, keyfile.name) == ("client.pem", "client.key")
    assert certfile.parent == keyfile.parent != cafile.parent
    pods = [one(docs, "Deployment"), one(docs, "Job", "topics"), one(docs, "Job", "replay")]
    for obj in pods:
        mounts = {m["mountPath"]: m for m in container(obj)["volumeMounts"]}
        mount = mounts[str(certfile.parent)]
        assert mount["readOnly"] is True
        assert mounts[str(cafile.parent)]["readOnly"] is True
        (volume,) = [v for v in pod_spec(obj)["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == "kafka-client"
        # The private key is readable by the pod's fsGroup (the worker's group) only.
        assert volume["secret"]["items"] == [
            {"key": "client.pem", "path": "client.pem"},
            {"key": "client.key", "path": "client.key", "mode": 0o440},
        ]
        assert pod_spec(obj)["securityContext"]["fsGroup"] == 10001
        env = env_of(obj)
        assert env["REDSTRING_KAFKA_SSL_KEY_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "kafka-client-pass",
            "key": "key-password",
        }
    # The topics hook gets the same settings inline.
    topics = env_of(one(docs, "Job", "topics"))
    assert topics["REDSTRING_KAFKA_SSL_KEYFILE"]["value"] == str(keyfile)
    assert topics["REDSTRING_KAFKA__CLIENT_ID"]["value"] == "projector"
    # Without an fsGroup, the key keeps the default mode (0644): a 0440 file owned
    # by root would be unreadable for the worker's uid.
    no_group = one(render(*MTLS, "podSecurityContext.fsGroup=null"), "Deployment")
    (volume,) = [v for v in pod_spec(no_group)["volumes"] if v["name"] == mount["name"]]
    assert "mode" not in volume["secret"]["items"][1]


def test_kafka_properties_become_pass_through_settings() -> None:
    config = one(render(*MTLS), "ConfigMap")["data"]
    assert {k: v for k, v in config.items() if k.startswith("REDSTRING_KAFKA__")} == {
        "REDSTRING_KAFKA__CLIENT_ID": "projector",
        "REDSTRING_KAFKA__REQUEST_TIMEOUT_MS": "45000",
        "REDSTRING_KAFKA__SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "https",
        "REDSTRING_KAFKA__LOG_LEVEL": "6",
    }
    # Numbers from a values file are floats to helm: written as integers.
    all_on = one(render(all_on=True), "ConfigMap")["data"]
    assert all_on["REDSTRING_KAFKA__MAX_PARTITION_FETCH_BYTES"] == "2097152"
    assert all_on["REDSTRING_KAFKA__CHECK_CRCS"] == "true"


@pytest.mark.parametrize("variant", ["defaults", "all-on", "mtls"])
def test_the_chart_s_kafka_settings_are_what_the_clients_accept(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's start check passes the rendered settings as a pod sees them,
    and streams.kafka.config.client_configs takes them (the secrets' values stand
    in; the TLS files do not exist here, so the worker's SSL context is not built)."""
    all_on, sets = VARIANTS[variant]
    docs = render(*sets, all_on=all_on)
    for name in list(os.environ):
        if name.startswith("REDSTRING_"):
            monkeypatch.delenv(name)
    for name, value in one(docs, "ConfigMap")["data"].items():
        monkeypatch.setenv(name, value)
    for name, entry in env_of(one(docs, "Deployment")).items():
        if "secretKeyRef" in entry.get("valueFrom", {}):
            monkeypatch.setenv(name, "from-a-secret")
    check_environment(os.environ)
    monkeypatch.setattr(kafka_config, "ssl_context", lambda settings, props: "context")
    configs = client_configs(Settings())
    protocol = one(docs, "ConfigMap")["data"]["REDSTRING_KAFKA_SECURITY_PROTOCOL"]
    assert configs.librdkafka["security.protocol"] == protocol
    assert ("ssl_context" in configs.aiokafka) == protocol.endswith("SSL")
    if variant == "mtls":
        assert configs.librdkafka["ssl.key.password"] == "from-a-secret"
        assert configs.faust == {"broker_client_id": "projector", "broker_request_timeout": 45.0}
        assert configs.cli_only == ("log_level",)


# --- docs/deploy.md, "Kafka security" -------------------------------------------------


def kafka_security_examples(language: str) -> list[str]:
    """The ```language blocks of docs/deploy.md's "Kafka security" section."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("\n## Kafka security\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{language}\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


def use_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """Settings from exactly ``env``, as a worker's start would judge them."""
    for name in list(os.environ):
        if name.startswith("REDSTRING_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    check_environment(os.environ)
    # The TLS files do not exist here: the worker's SSL context is not built.
    monkeypatch.setattr(kafka_config, "ssl_context", lambda settings, props: "context")
    return Settings()


def test_the_deploy_docs_show_each_kafka_configuration_both_ways() -> None:
    values = [yaml.safe_load(block) for block in kafka_security_examples("yaml")]
    envs = [block for block in kafka_security_examples("sh") if "REDSTRING_KAFKA" in block]
    # Confluent Cloud, MSK with SCRAM, MSK with mTLS, Aiven with TLS and with SCRAM.
    assert len(values) == len(envs) == 5
    mechanisms = [v["kafka"].get("sasl", {}).get("mechanism") for v in values]
    assert mechanisms == ["PLAIN", "SCRAM-SHA-512", None, None, "SCRAM-SHA-256"]


@pytest.mark.parametrize("index", range(5))
def test_the_deploy_docs_kafka_examples_work(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chart example renders, and gives the settings its env example gives."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(kafka_security_examples("yaml")[index])
    docs = list(_render(KUBE_VERSION, (str(values_file),), ()))
    env = {
        name: "from-a-secret"
        for name, entry in env_of(one(docs, "Deployment")).items()
        if "secretKeyRef" in entry.get("valueFrom", {})
    }
    chart = client_configs(use_environment(monkeypatch, {**one(docs, "ConfigMap")["data"], **env}))
    block = [b for b in kafka_security_examples("sh") if "REDSTRING_KAFKA" in b][index]
    lines = dict(line.split("=", 1) for line in block.splitlines() if line.strip())
    env_example = client_configs(use_environment(monkeypatch, lines))
    for key in ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username"):
        assert chart.librdkafka.get(key) == env_example.librdkafka.get(key), key
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        assert chart.librdkafka.get(key) == env_example.librdkafka.get(key), key


def test_config_map_values_are_what_settings_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    for all_on in (False, True):
        data = one(render(all_on=all_on), "ConfigMap")["data"]
        for name in list(os.environ):
            if name.startswith("REDSTRING_"):
                monkeypatch.delenv(name)
        for name, value in data.items():
            monkeypatch.setenv(name, value)
        settings = Settings()
        for name, value in data.items():
            if name in family_members(set(data)):
                family, key = name.removeprefix("REDSTRING_").lower().split("__", 1)
                assert getattr(settings, family)[key] == value, name
                continue
            parsed = getattr(settings, name.removeprefix("REDSTRING_").lower())
            assert parsed == type(parsed)(value), name


# --- metrics -----------------------------------------------------------------------


def test_metrics_service_is_annotated_for_prometheus() -> None:
    docs = render()
    service = one(docs, "Service")
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "6066"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert service["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["targetPort"]) == ("http", "http")
    assert not by_kind(docs, "ServiceMonitor")


def test_optional_service_monitor_scrapes_the_metrics_service() -> None:
    docs = render(all_on=True)
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {
        "port": "http",
        "path": "/metrics",
        "interval": "15s",
        "scrapeTimeout": "10s",
    }
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_network_policy_admits_only_the_metrics_port_and_the_read_api() -> None:
    docs = render(all_on=True)
    policy = one(docs, "NetworkPolicy")
    rule, test, api = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"]
    # The `helm test` Pod may ask the workers' /readyz, and reach them.
    assert test["ports"] == [{"port": "http", "protocol": "TCP"}]
    (tester,) = test["from"]
    pod = one(docs, "Pod")
    assert tester["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (way,) = [e for e in policy["spec"]["egress"] if "to" in e]
    assert way["ports"] == [{"port": 7070, "protocol": "TCP"}]
    worker = one(docs, "Deployment")
    assert way["to"][0]["podSelector"]["matchLabels"] == worker["spec"]["selector"]["matchLabels"]
    assert api["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert api["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}}
    ]
    assert "Egress" in policy["spec"]["policyTypes"]
    (only,) = one(render("networkPolicy.enabled=true", "tests.enabled=false"), "NetworkPolicy")[
        "spec"
    ]["ingress"]
    assert only["ports"] == [{"port": "http", "protocol": "TCP"}]


# --- the read API (`redstring serve`) -------------------------------------------------


def test_the_read_api_is_off_by_default() -> None:
    docs = render()
    assert not [
        d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/component") == "read-api"
    ]


def test_the_read_api_deployment_and_service() -> None:
    docs = render("readApi.enabled=true", "readApi.auth.keySecret.name=redstring-jwt")
    deployment = one(docs, "Deployment", "read-api")
    api = container(deployment)
    assert api["args"] == ["serve"]
    assert api["image"] == container(one(docs, "Deployment"))["image"]
    assert api["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert api["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert api["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert api["envFrom"][0]["configMapRef"]["name"] == one(docs, "ConfigMap")["metadata"]["name"]
    env = env_of(deployment)
    assert env["REDSTRING_SERVE_PORT"]["value"] == "8080"
    assert env["REDSTRING_SERVE_HOST"]["value"] == "0.0.0.0"
    assert env["REDSTRING_SERVE_JWT_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "redstring-jwt",
        "key": "jwt-key",
    }
    # Without credentials of its own, the workers' (no control key, no Kafka secret).
    assert env["REDSTRING_NEO4J_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "redstring-neo4j"
    assert env["REDSTRING_PG_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "redstring-postgres"
    assert "REDSTRING_CONTROL_KEY" not in env
    pod = pod_spec(deployment)
    assert pod["automountServiceAccountToken"] is False
    assert api["securityContext"]["readOnlyRootFilesystem"] is True
    service = one(docs, "Service", "read-api")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]
    # The workers' selector does not take the read API's pods.
    assert one(docs, "Deployment")["spec"]["selector"] != deployment["spec"]["selector"]


def test_the_read_api_uses_its_own_store_credentials_when_given() -> None:
    env = env_of(one(render(all_on=True), "Deployment", "read-api"))
    assert env["REDSTRING_NEO4J_USER"]["value"] == "redstring_reader"
    assert env["REDSTRING_NEO4J_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == (
        "redstring-neo4j-reader"
    )
    assert env["REDSTRING_PG_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "redstring-pg-reader"
    assert env["REDSTRING_SERVE_JWKS_URL"]["value"].startswith("https://")
    assert env["REDSTRING_SERVE_TENANT_CLAIM"]["value"] == "org_id"
    assert "REDSTRING_SERVE_JWT_KEY" not in env


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (["readApi.enabled=true"], "readApi.enabled needs readApi.auth.keySecret.name"),
        (
            [
                "readApi.enabled=true",
                "readApi.auth.keySecret.name=k",
                "readApi.auth.jwksUrl=https://x",
            ],
            "not both",
        ),
    ],
)
def test_the_read_api_needs_one_key_source(sets: list[str], complaint: str) -> None:
    assert complaint in render_fails(*sets)


# --- the topics hook and the replay Job ---------------------------------------------


def test_topics_job_is_a_pre_install_and_pre_upgrade_hook() -> None:
    job = one(render(), "Job", "topics")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    assert container(job)["args"] == ["topics", "create"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    # It runs before the ConfigMap exists on a first install: settings inline.
    worker = one(render(), "Deployment")
    config = one(render(), "ConfigMap")["data"]
    env = env_of(job)
    for name, value in config.items():
        assert env[name] == {"name": name, "value": value}
    assert "envFrom" not in container(job)
    assert (
        container(worker)["envFrom"][0]["configMapRef"]["name"]
        == one(render(), "ConfigMap")["metadata"]["name"]
    )
    assert not [j for j in by_kind(render("topicsJob.enabled=false"), "Job")]


def test_no_replay_job_unless_a_tenant_is_asked_for() -> None:
    assert not [
        j
        for j in by_kind(render(), "Job")
        if j["metadata"]["labels"]["app.kubernetes.io/component"] == "replay"
    ]


def test_online_replay_job() -> None:
    docs = render("replay.tenant=acme")
    job = one(docs, "Job", "replay")
    assert container(job)["args"] == ["replay", "--tenant", "acme", "--yes"]
    assert "helm.sh/hook" not in job["metadata"].get("annotations", {})
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    env = env_of(job)
    assert env["REDSTRING_CONTROL_KEY"]["valueFrom"]["secretKeyRef"]["name"]
    assert (
        container(job)["envFrom"][0]["configMapRef"]["name"]
        == one(docs, "ConfigMap")["metadata"]["name"]
    )
    # Online: the workers keep running and do the rebuild.
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    # A different tenant is a different Job (a Job's spec cannot change in place).
    other = one(render("replay.tenant=globex"), "Job", "replay")
    assert other["metadata"]["name"] != job["metadata"]["name"]
    assert len(job["metadata"]["name"]) <= 63


def test_offline_replay_job_stops_the_workers() -> None:
    docs = render("replay.tenant=acme", "replay.offline=true")
    job = one(docs, "Job", "replay")
    assert container(job)["args"] == ["replay", "--tenant", "acme", "--yes", "--offline"]
    assert one(docs, "Deployment")["spec"]["replicas"] == 0
    online = one(render("replay.tenant=acme"), "Job", "replay")
    assert job["metadata"]["name"] != online["metadata"]["name"]


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart whose NOTES.txt is also an ordinary template: `helm
    template` leaves NOTES out, and `helm install --dry-run` wants a cluster."""
    copy = tmp_path_factory.mktemp("chart") / "redstring"
    shutil.copytree(CHART, copy)
    notes = (copy / "templates" / "NOTES.txt").read_text()
    templates = copy / "templates"
    (templates / "_notes-under-test.tpl").write_text(
        '{{- define "notes-under-test" -}}\n' + notes + "\n{{- end }}\n"
    )
    (templates / "notes-under-test.yaml").write_text(
        'notes: {{ include "notes-under-test" . | toJson }}\n'
    )
    return copy


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ([], "at most\n12 workers do work"),
        (["replay.tenant=acme"], 'ONLINE REPLAY of tenant "acme"'),
        (["replay.tenant=acme", "replay.offline=true"], 'OFFLINE REPLAY of tenant "acme"'),
        (["replicaCount=20"], "WARNING: replicaCount 20 > topic.partitions 12"),
        (["controlKeySecret.name="], "controlKeySecret is not set"),
    ],
)
def test_notes(notes_chart: Path, sets: list[str], expected: str) -> None:
    args = ["template", RELEASE, str(notes_chart), "--namespace", NAMESPACE]
    args += ["--kube-version", KUBE_VERSION, "--show-only", "templates/notes-under-test.yaml"]
    out = helm(*args, *[arg for item in sets for arg in ("--set", item)]).stdout
    notes: str = yaml.safe_load(out)["notes"]
    assert expected in notes, notes
    if "replay.offline=true" not in sets:
        assert "OFFLINE" not in notes


# --- autoscaling on lag: KEDA or an HPA ----------------------------------------------

#: What the chart writes of KEDA's ScaledObject and TriggerAuthentication, after
#: their CRDs (keda.sh/v1alpha1): the fields, their types, and trigger metadata
#: as strings only (KEDA refuses an unquoted number there).
KEDA_SCHEMAS: dict[str, Manifest] = {
    "ScaledObject": {
        "type": "object",
        "additionalProperties": False,
        "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {k: {"type": "string"} for k in ("apiVersion", "kind", "name")},
            },
            **{
                k: {"type": "integer", "minimum": 0}
                for k in ("minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod")
            },
            "triggers": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type", "metadata"],
                    "properties": {
                        "type": {"const": "kafka"},
                        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                        "authenticationRef": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1},
                                "kind": {
                                    "enum": [
                                        "TriggerAuthentication",
                                        "ClusterTriggerAuthentication",
                                    ]
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "TriggerAuthentication": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "env": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["parameter", "name"],
                    "properties": {
                        k: {"type": "string"} for k in ("parameter", "name", "containerName")
                    },
                },
            },
            "secretTargetRef": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["parameter", "name", "key"],
                    "properties": {k: {"type": "string"} for k in ("parameter", "name", "key")},
                },
            },
        },
    },
}
#: The Kafka scaler's authentication parameters the chart may set.
KEDA_KAFKA_PARAMETERS = {"username", "password", "ca", "cert", "key", "keyPassword"}


def keda_objects(docs: list[Manifest]) -> tuple[Manifest, Manifest | None]:
    """The ScaledObject and its TriggerAuthentication (or None), each checked
    against KEDA_SCHEMAS."""
    scaled = one(docs, "ScaledObject")
    auths = by_kind(docs, "TriggerAuthentication")
    for obj in (scaled, *auths):
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        jsonschema.validate(obj["spec"], KEDA_SCHEMAS[obj["kind"]])
    return scaled, (auths[0] if auths else None)


def test_no_autoscaler_by_default() -> None:
    docs = render()
    assert not by_kind(docs, "ScaledObject") + by_kind(docs, "HorizontalPodAutoscaler")
    assert one(docs, "Deployment")["spec"]["replicas"] == 2


def test_keda_scales_the_workers_on_the_group_s_lag() -> None:
    docs = render("autoscaling.keda.enabled=true", "autoscaling.keda.lagThreshold=250")
    scaled, auth = keda_objects(docs)
    deployment = one(docs, "Deployment")
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    # The autoscaler owns the replicas: an upgrade must not reset them.
    assert "replicas" not in deployment["spec"]
    # Capped at the partition count.
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 12)
    (trigger,) = scaled["spec"]["triggers"]
    config = one(docs, "ConfigMap")["data"]
    assert trigger["metadata"] == {
        "bootstrapServers": config["REDSTRING_KAFKA_BOOTSTRAP"],
        "consumerGroup": config["REDSTRING_GROUP_ID"],
        "topic": config["REDSTRING_TOPIC"],
        "lagThreshold": "250",
        "activationLagThreshold": "0",
        "offsetResetPolicy": "earliest",
        "allowIdleConsumers": "false",
    }
    # PLAINTEXT: nothing to authenticate with.
    assert auth is None and "authenticationRef" not in trigger


def test_keda_authenticates_with_the_chart_s_kafka_secrets() -> None:
    docs = render(all_on=True)
    scaled, auth = keda_objects(docs)
    assert auth is not None
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["authenticationRef"] == {"name": auth["metadata"]["name"]}
    assert trigger["metadata"]["sasl"] == "scram_sha512"
    assert trigger["metadata"]["tls"] == "enable"
    assert scaled["spec"]["maxReplicaCount"] == 24
    secrets = {e["parameter"]: (e["name"], e["key"]) for e in auth["spec"]["secretTargetRef"]}
    assert secrets == {
        "password": ("redstring-kafka", "sasl-password"),
        "ca": ("kafka-ca", "ca.crt"),
        "cert": ("redstring-kafka-client", "tls.crt"),
        "key": ("redstring-kafka-client", "tls.key"),
        "keyPassword": ("redstring-kafka-client-key", "password"),
    }
    # The username is not a secret: KEDA reads it from the worker's environment.
    (username,) = auth["spec"]["env"]
    worker = container(one(docs, "Deployment"))
    assert username["containerName"] == worker["name"]
    assert one(docs, "ConfigMap")["data"][username["name"]] == "redstring"
    assert set(secrets) | {username["parameter"]} <= KEDA_KAFKA_PARAMETERS


def test_keda_over_mutual_tls() -> None:
    scaled, auth = keda_objects(render(*VARIANTS["keda-mtls"][1]))
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["metadata"]["tls"] == "enable"
    assert "sasl" not in trigger["metadata"]
    assert auth is not None and "env" not in auth["spec"]
    assert {e["parameter"] for e in auth["spec"]["secretTargetRef"]} == {
        "ca",
        "cert",
        "key",
        "keyPassword",
    }


def test_keda_with_a_trigger_authentication_of_your_own() -> None:
    docs = render(
        "kafka.securityProtocol=SASL_SSL",
        "kafka.sasl.mechanism=OAUTHBEARER",
        "autoscaling.keda.enabled=true",
        "autoscaling.keda.authenticationRef.name=kafka-oidc",
        "autoscaling.keda.authenticationRef.kind=ClusterTriggerAuthentication",
    )
    scaled, auth = keda_objects(docs)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["authenticationRef"] == {
        "name": "kafka-oidc",
        "kind": "ClusterTriggerAuthentication",
    }
    # Its own says how: nothing set here that KEDA would refuse as set twice.
    assert "sasl" not in trigger["metadata"] and "tls" not in trigger["metadata"]
    assert auth is None


def test_an_hpa_on_the_lag_metric() -> None:
    docs = render(*VARIANTS["hpa"][1], "autoscaling.hpa.metric.selector.topic=redstring.events")
    hpa = one(docs, "HorizontalPodAutoscaler")
    deployment = one(docs, "Deployment")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 12)
    (metric,) = hpa["spec"]["metrics"]
    assert metric == {
        "type": "External",
        "external": {
            "metric": {
                "name": "redstring_consumer_lag",
                "selector": {"matchLabels": {"topic": "redstring.events"}},
            },
            "target": {"type": "AverageValue", "averageValue": "1000"},
        },
    }
    pods = one(render(*VARIANTS["hpa-pods"][1]), "HorizontalPodAutoscaler")
    (metric,) = pods["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"] == {"name": "redstring_consumer_lag"}
    renamed = one(
        render(*VARIANTS["hpa"][1], "autoscaling.hpa.metric.name=redstring_lag_records"),
        "HorizontalPodAutoscaler",
    )
    assert renamed["spec"]["metrics"][0]["external"]["metric"]["name"] == "redstring_lag_records"


def test_the_default_lag_metric_is_one_the_workers_serve() -> None:
    from streams.worker.metrics import Metrics

    served = {family.name for family in Metrics().registry.collect()}
    default = default_values()["autoscaling"]["hpa"]["metric"]["name"]
    assert default in served, sorted(served)


def test_no_autoscaler_while_an_offline_replay_holds_the_workers_at_zero() -> None:
    for switch in ("autoscaling.keda.enabled=true", "autoscaling.hpa.enabled=true"):
        docs = render(switch, "replay.tenant=acme", "replay.offline=true")
        assert not by_kind(docs, "ScaledObject") + by_kind(docs, "HorizontalPodAutoscaler")
        assert one(docs, "Deployment")["spec"]["replicas"] == 0


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (
            ["autoscaling.keda.enabled=true", "autoscaling.maxReplicas=13"],
            "autoscaling.maxReplicas=13 is more than topic.partitions=12",
        ),
        (
            ["autoscaling.hpa.enabled=true", "autoscaling.minReplicas=20"],
            "autoscaling.minReplicas=20 is more than the ceiling",
        ),
        (["autoscaling.hpa.enabled=true", "autoscaling.minReplicas=0"], "only KEDA scales to 0"),
        (
            [
                "autoscaling.keda.enabled=true",
                "kafka.securityProtocol=SASL_SSL",
                "kafka.sasl.mechanism=OAUTHBEARER",
            ],
            "authenticationRef.name",
        ),
        (
            [
                "autoscaling.keda.enabled=true",
                "kafka.securityProtocol=SASL_SSL",
                "kafka.sasl.mechanism=PLAIN",
                "kafka.sasl.username=u",
            ],
            "kafka.sasl.passwordSecret.name",
        ),
    ],
)
def test_the_chart_refuses_autoscaling_it_cannot_honour(sets: list[str], complaint: str) -> None:
    assert complaint in render_fails(*sets)


def test_keda_may_stop_every_worker_while_nothing_lags() -> None:
    scaled, _ = keda_objects(render("autoscaling.keda.enabled=true", "autoscaling.minReplicas=0"))
    assert scaled["spec"]["minReplicaCount"] == 0


# --- service account, labels, the test hook, Chart.yaml --------------------------------


def test_a_service_account_with_a_cloud_identity() -> None:
    assert not by_kind(render(), "ServiceAccount")
    assert "serviceAccountName" not in pod_spec(one(render(), "Deployment"))
    docs = render(
        "serviceAccount.create=true",
        r"serviceAccount.annotations.iam\.gke\.io/gcp-service-account=rs@p.iam.gserviceaccount.com",
        "readApi.enabled=true",
        "readApi.auth.keySecret.name=k",
        "replay.tenant=acme",
    )
    account = one(docs, "ServiceAccount")
    assert account["metadata"]["name"] == "rs-test-redstring"
    assert account["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "rs@p.iam.gserviceaccount.com"
    }
    assert account["automountServiceAccountToken"] is False
    pods = [*by_kind(docs, "Deployment"), *by_kind(docs, "Job")]
    assert len(pods) == 4
    for obj in pods:
        assert pod_spec(obj)["serviceAccountName"] == "rs-test-redstring"
        assert pod_spec(obj)["automountServiceAccountToken"] is False
    assert one(docs, "Pod")["spec"]["serviceAccountName"] == "rs-test-redstring"
    # Named by serviceAccountName when both are given (all-on: an IRSA role).
    all_on = render(all_on=True)
    account = one(all_on, "ServiceAccount")
    assert account["metadata"]["name"] == "redstring-workers"
    assert "eks.amazonaws.com/role-arn" in account["metadata"]["annotations"]
    assert pod_spec(one(all_on, "Deployment"))["serviceAccountName"] == "redstring-workers"


@pytest.mark.parametrize("variant", ["defaults", "all-on", "hpa", "offline-replay"])
def test_common_labels_are_on_every_object_and_pod(variant: str) -> None:
    all_on, sets = VARIANTS[variant]
    # all-on has the read API and a ServiceAccount already.
    extra = () if all_on else ("readApi.enabled=true", "readApi.auth.keySecret.name=k")
    docs = render(
        *sets, *extra, "commonLabels.team=data", "serviceAccount.create=true", all_on=all_on
    )
    assert len(docs) >= 8
    for doc in docs:
        assert doc["metadata"]["labels"]["team"] == "data", doc["kind"]
        template = doc.get("spec", {}).get("template")
        if template is not None:
            assert template["metadata"]["labels"]["team"] == "data", doc["kind"]
        # Never in a selector: a selector cannot change on an upgrade.
        selector = doc.get("spec", {}).get("selector", {})
        assert "team" not in selector.get("matchLabels", selector), doc["kind"]


def test_pod_labels_reach_every_pod_the_jobs_included() -> None:
    docs = render("podLabels.team=data", "replay.tenant=acme")
    pods = [*by_kind(docs, "Deployment"), *by_kind(docs, "Job")]
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods} == {
        "projector",
        "topics",
        "replay",
    }
    for obj in pods:
        labels = obj["spec"]["template"]["metadata"]["labels"]
        assert labels["team"] == "data", obj["metadata"]["name"]
        assert (
            labels["app.kubernetes.io/component"]
            == obj["metadata"]["labels"]["app.kubernetes.io/component"]
        )
    assert one(docs, "Pod")["metadata"]["labels"]["team"] == "data"


@pytest.mark.parametrize("all_on", [False, True], ids=["defaults", "all-on"])
def test_helm_test_asks_the_workers_readyz(all_on: bool) -> None:
    docs = render(all_on=all_on)
    pod = one(docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert "hook-succeeded" in pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert "volumes" not in spec  # none of the workers' Kafka keys
    (tester,) = spec["containers"]
    worker = container(one(docs, "Deployment"))
    assert tester["image"] == worker["image"]
    assert tester["securityContext"] == worker["securityContext"]
    service = one(docs, "Service")
    port = service["spec"]["ports"][0]["port"]
    script, url, timeout = tester["args"]
    assert url == (f"http://{service['metadata']['name']}.{NAMESPACE}.svc:{port}/readyz")
    assert int(timeout) < spec["activeDeadlineSeconds"]
    assert tester["command"][0] == "python"
    compile(script, "readyz", "exec")
    assert not by_kind(render("tests.enabled=false"), "Pod")
    # It goes through the metrics Service: none without it.
    assert not by_kind(render("metrics.service.enabled=false"), "Pod")


def test_the_test_pod_s_script_waits_for_a_200(tmp_path: Path) -> None:
    """The script as the Pod runs it, against a local server that answers 503
    and then 200, and against one that never does."""
    import http.server
    import sys
    import threading

    (tester,) = one(render(), "Pod")["spec"]["containers"]
    script = tester["args"][0]
    answers = [503, 200]

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = answers.pop(0) if answers else 503
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b'{"ready": true}' if code == 200 else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/readyz"
        ok = subprocess.run(
            [sys.executable, "-c", script, url, "30"], capture_output=True, text=True, timeout=60
        )
        assert ok.returncode == 0, ok.stderr
        assert "200" in ok.stdout
        failed = subprocess.run(
            [sys.executable, "-c", script, url, "1"], capture_output=True, text=True, timeout=60
        )
        assert failed.returncode == 1 and "503" in failed.stderr
    finally:
        server.shutdown()


def test_chart_yaml_has_home_sources_and_icon() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"].startswith("https://")
    assert chart["sources"] and all(s.startswith("https://") for s in chart["sources"])
    assert chart["icon"].startswith("https://") and chart["icon"].endswith("/icon.svg")
    # The icon it points at is the chart's own.
    assert chart["icon"].endswith("/helm/redstring/icon.svg")
    assert (CHART / "icon.svg").read_text().lstrip().startswith("<svg")
