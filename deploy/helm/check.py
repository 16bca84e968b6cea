"""Renders deploy/helm/synctide as `helm template` does (Helm's own Go SDK, through the PyPI
package helm-python-sdk) with three sets of values, and validates every manifest against the
Kubernetes OpenAPI schemas, strictly (unknown fields refused), for the oldest and newest versions
the chart supports (PyPI kubernetes-validate ships the schemas; nothing is fetched). Then checks
the promises the chart makes: probes, the worker's grace, the migrate hook, the Postgres URLs'
sslmode and CA. Run by .ci/run; exits 1 on any problem."""
import sys
from pathlib import Path

import helm_python
import kubernetes_validate
import yaml

CHART = Path(__file__).parent / "synctide"
KUBE_VERSIONS = ["1.30.0", "1.37.0"]

SECRETS = {
    "databasePassword": "app-password",
    "databaseMigrationPassword": "owner-password",
    "adminApiKey": "f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2",
    "credentialsKey": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
}
VALUE_SETS = {
    "defaults with chart-made secrets": {"secrets": SECRETS},
    "existing secrets, mTLS and API key, HPA": {
        "secrets": {"existingSecret": "synctide-secrets"},
        "temporal": {
            "address": "acme.a1b2c.tmprl.cloud:7233",
            "namespace": "acme.a1b2c",
            "apiKey": True,
            "tls": {"enabled": True, "existingSecret": "temporal-client-tls", "mtls": True, "ca": True, "serverName": "acme.a1b2c.tmprl.cloud"},
        },
        "api": {"hpa": {"enabled": True}, "shutdownGraceSeconds": 40},
        "worker": {"hpa": {"enabled": True}, "shutdownGraceSeconds": 120, "maxCachedWorkflows": 0, "targetCpu": 0.7},
        "env": {"PROVIDER_HOSTS": "api.github.com"},
    },
    "Postgres verified against a private CA": {
        "secrets": SECRETS,
        "postgres": {"sslmode": "verify-full", "caSecret": {"name": "postgres-ca", "key": "root.crt"}},
    },
}

problems = []


def check(condition, message):
    if not condition:
        problems.append(message)


lint = helm_python.lint(str(CHART), {"secrets": SECRETS}, strict=True)
# Helm's severities: 1 info, 2 warning, 4 error (strict: warnings count).
for message in (lint.get("messages") or []):
    if message.get("severity", 0) >= 2:
        problems.append(f"helm lint: {message}")
for error in (lint.get("errors") or []):
    problems.append(f"helm lint: {error}")

chart = helm_python.Chart.load(str(CHART))
try:
    for label, values in VALUE_SETS.items():
        before = len(problems)
        rendered = chart.render(values, name="synctide", namespace="synctide", is_install=True)
        docs = [d for text in rendered.values() for d in yaml.safe_load_all(text) if d]
        for doc in docs:
            for version in KUBE_VERSIONS:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except Exception as err:  # ValidationError, InvalidSchemaError, VersionNotSupportedError
                    problems.append(f"{label}: {doc.get('kind')}/{doc['metadata'].get('name')} (Kubernetes {version}): {err}")
        kinds = {(d["kind"], d["metadata"]["name"]): d for d in docs}
        merged = chart.merge_values(values)
        api = kinds.get(("Deployment", "synctide-api"))
        worker = kinds.get(("Deployment", "synctide-worker"))
        job = kinds.get(("Job", "synctide-migrate"))
        check(api and worker and job, f"{label}: API and worker Deployments and the migrate Job are rendered")
        if not (api and worker and job):
            continue
        api_c = api["spec"]["template"]["spec"]["containers"][0]
        worker_pod = worker["spec"]["template"]["spec"]
        worker_c = worker_pod["containers"][0]
        check(api_c["readinessProbe"]["httpGet"]["path"] == "/readyz" and api_c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{label}: API probes /readyz and /healthz")
        check(worker_c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{label}: the worker's readiness is its /readyz")
        grace = int(next(e["value"] for e in worker_c["env"] if e["name"] == "WORKER_SHUTDOWN_GRACE_SECONDS"))
        check(worker_pod.get("terminationGracePeriodSeconds", 0) > grace, f"{label}: terminationGracePeriodSeconds above WORKER_SHUTDOWN_GRACE_SECONDS")
        check(grace == merged["worker"]["shutdownGraceSeconds"], f"{label}: the worker's grace is the value's")
        # The API serves on for api.preStopSeconds after its pod starts terminating (its endpoint's
        # removal still on its way to kube-proxy), then closes within the pod's grace.
        wait = merged["api"]["preStopSeconds"]
        check(api_c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command") == ["sleep", str(wait)], f"{label}: the API waits api.preStopSeconds before its SIGTERM")
        # Then its own shutdown: API_SHUTDOWN_GRACE_SECONDS is the value's, and the pod's grace
        # leaves it whole, and 20 s for the exit, after the preStop wait.
        api_grace = int(next(e["value"] for e in api_c["env"] if e["name"] == "API_SHUTDOWN_GRACE_SECONDS"))
        check(api_grace == merged["api"]["shutdownGraceSeconds"], f"{label}: the API's grace is the value's")
        check(api["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30) >= wait + api_grace + 20, f"{label}: the API pod's grace leaves API_SHUTDOWN_GRACE_SECONDS and 20 s after the preStop wait")
        # Unset, the worker sizes its cache to the pod's memory limit; a value (0 too) is passed on.
        cache = next((e["value"] for e in worker_c["env"] if e["name"] == "WORKER_MAX_CACHED_WORKFLOWS"), None)
        wanted = merged["worker"]["maxCachedWorkflows"]
        check(cache == (None if wanted == "" else str(wanted)), f"{label}: WORKER_MAX_CACHED_WORKFLOWS is {cache!r} for the value {wanted!r}")
        target = next((e["value"] for e in worker_c["env"] if e["name"] == "WORKER_TARGET_CPU"), None)
        wanted = merged["worker"]["targetCpu"]
        check(target == (None if wanted == "" else str(wanted)), f"{label}: WORKER_TARGET_CPU is {target!r} for the value {wanted!r}")
        for c in (api_c, worker_c):
            check(c["command"][0] == "node", f"{label}: {c['name']} runs node directly")
            env = {e["name"]: e.get("value") for e in c["env"]}
            check(env.get("MIGRATE_ON_START") == "false", f"{label}: {c['name']} leaves migrations to the Job")
            check("synctide_app@" in env["DATABASE_URL"], f"{label}: {c['name']} runs as the DML-only role")
        # Every Postgres URL has libpq's sslmode (node-postgres reads `require` as verify-full
        # without uselibpqcompat=true) and, with postgres.caSecret, the CA its container mounts.
        pg = merged["postgres"]
        job_c = job["spec"]["template"]["spec"]["containers"][0]
        for c, pod, var in ((api_c, api["spec"]["template"]["spec"], "DATABASE_URL"), (worker_c, worker_pod, "DATABASE_URL"), (job_c, job["spec"]["template"]["spec"], "DATABASE_MIGRATION_URL")):
            url = next(e["value"] for e in c["env"] if e["name"] == var)
            query = dict(part.split("=", 1) for part in url.split("?", 1)[1].split("&"))
            check(query.get("sslmode") == pg["sslmode"] and query.get("uselibpqcompat") == "true", f"{label}: {c['name']}'s {var} has sslmode={pg['sslmode']} with uselibpqcompat=true: {url}")
            if pg["caSecret"]["name"]:
                mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
                volumes = {v["name"]: v for v in pod.get("volumes", [])}
                check(query.get("sslrootcert") == f"{mounts.get('postgres-ca')}/{pg['caSecret']['key']}", f"{label}: {c['name']}'s sslrootcert is the mounted CA: {url}")
                check(volumes.get("postgres-ca", {}).get("secret", {}).get("secretName") == pg["caSecret"]["name"], f"{label}: {c['name']} mounts the Secret postgres.caSecret.name")
            else:
                check("sslrootcert" not in query and "postgres-ca" not in {m["name"] for m in c.get("volumeMounts", [])}, f"{label}: {c['name']} has no CA without postgres.caSecret")
        hooks = job["metadata"]["annotations"]["helm.sh/hook"]
        check("pre-install" in hooks and "pre-upgrade" in hooks, f"{label}: migrate is a pre-install/pre-upgrade hook")
        job_env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        check("synctide_owner@" in job_env["DATABASE_MIGRATION_URL"], f"{label}: migrate runs as the schema owner")
        check(("PodDisruptionBudget", "synctide-worker") in kinds and ("PodDisruptionBudget", "synctide-api") in kinds, f"{label}: both PDBs")
        # Each worker pod's /metrics is scraped on its own: a headless Service names every pod's
        # address (one DNS name for Prometheus's dns_sd_configs), as a ClusterIP Service could not.
        metrics = kinds.get(("Service", "synctide-worker-metrics"))
        check(metrics and metrics["spec"].get("clusterIP") == "None", f"{label}: a headless Service synctide-worker-metrics")
        if metrics:
            check(metrics["spec"]["selector"].items() <= worker["spec"]["template"]["metadata"]["labels"].items(), f"{label}: the metrics Service selects the worker pods")
            check([(p["name"], p["port"], p["targetPort"]) for p in metrics["spec"]["ports"]] == [("metrics", merged["worker"]["metricsPort"], "metrics")], f"{label}: the metrics Service's port is worker.metricsPort")
        for c in (api_c, worker_c, job["spec"]["template"]["spec"]["containers"][0]):
            check(c.get("resources", {}).get("requests"), f"{label}: {c['name']} has resource requests")
        if merged["api"]["hpa"]["enabled"]:
            check(("HorizontalPodAutoscaler", "synctide-api") in kinds and "replicas" not in api["spec"], f"{label}: the API HPA owns the replica count")
        if merged["temporal"]["tls"]["mtls"]:
            env = {e["name"]: e.get("value") for e in worker_c["env"]}
            check(env.get("TEMPORAL_TLS_CERT") and env.get("TEMPORAL_TLS_KEY") and env.get("TEMPORAL_API_KEY_FILE"), f"{label}: mTLS files and the API key reach the processes")
        secrets_text = "\n".join(rendered.values())
        if merged["secrets"]["existingSecret"]:
            check(SECRETS["adminApiKey"] not in secrets_text and ("Secret", "synctide") not in kinds, f"{label}: an existing Secret is referenced, none is made")
        if len(problems) == before:
            print(f"ok: {label}: {len(docs)} manifests valid for Kubernetes {', '.join(KUBE_VERSIONS)}")

    # A shutdown grace set in `env` would leave the pods' terminationGracePeriodSeconds behind it:
    # the chart refuses it, naming the value to set instead.
    for name in ("API_SHUTDOWN_GRACE_SECONDS", "WORKER_SHUTDOWN_GRACE_SECONDS"):
        try:
            chart.render({"secrets": SECRETS, "env": {name: "60"}}, name="synctide", namespace="synctide", is_install=True)
            problems.append(f"env.{name} is refused")
        except Exception as err:
            check("shutdownGraceSeconds" in str(err), f"env.{name} is refused naming the value to set instead: {err}")

    # The processes read their secrets once, at start: a changed chart-made Secret (a rotated admin
    # key or database password) must roll the API and worker pods, or they keep the old values.
    def pod_templates(secrets):
        rendered = chart.render({"secrets": secrets}, name="synctide", namespace="synctide", is_install=False)
        docs = [d for text in rendered.values() for d in yaml.safe_load_all(text) if d]
        return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] == "Deployment"}

    before, after = pod_templates(SECRETS), pod_templates({**SECRETS, "adminApiKey": "0" * 48})
    for name in ("synctide-api", "synctide-worker"):
        check(before[name] != after[name], f"a changed secrets.adminApiKey changes the pod template of {name} (a rollout), else its pods keep the old key")
    check(pod_templates(SECRETS) == before, "the same secrets render the same pod templates (no rollout without a change)")

    # A PodDisruptionBudget never blocks a node drain for good: with as few replicas as it keeps
    # available (api.replicas 1, or an HPA's minReplicas 1), an eviction could never be allowed and
    # `kubectl drain` (a cluster upgrade) would wait forever.
    for values in ({"api": {"replicas": 1}, "worker": {"replicas": 1}}, {"api": {"hpa": {"enabled": True, "minReplicas": 1}}, "worker": {"hpa": {"enabled": True, "minReplicas": 1}}}):
        rendered = chart.render({"secrets": SECRETS, **values}, name="synctide", namespace="synctide", is_install=True)
        docs = [d for text in rendered.values() for d in yaml.safe_load_all(text) if d]
        for doc in docs:
            if doc["kind"] != "PodDisruptionBudget":
                continue
            component = doc["metadata"]["name"].removeprefix("synctide-")
            merged = chart.merge_values({"secrets": SECRETS, **values})[component]
            replicas = merged["hpa"]["minReplicas"] if merged["hpa"]["enabled"] else merged["replicas"]
            spec = doc["spec"]
            allowed = replicas - spec["minAvailable"] if "minAvailable" in spec else spec["maxUnavailable"]
            check(allowed >= 1, f"{values}: the PodDisruptionBudget {doc['metadata']['name']} lets one of {replicas} pod(s) be evicted: {spec}")

    # verify-ca without the CA to verify against is refused, naming the value.
    try:
        chart.render({"secrets": SECRETS, "postgres": {"sslmode": "verify-ca"}}, name="synctide", namespace="synctide", is_install=True)
        problems.append("postgres.sslmode=verify-ca without postgres.caSecret must fail")
    except helm_python.HelmError as err:
        check("postgres.caSecret.name" in str(err), f"the verify-ca error names postgres.caSecret.name: {err}")

    # A chart-made Secret without its values is refused, naming the value.
    try:
        chart.render({}, name="synctide", namespace="synctide", is_install=True)
        problems.append("rendering without secrets or an existing Secret must fail")
    except helm_python.HelmError as err:
        check("secrets.databasePassword" in str(err), f"the missing-secret error names the value: {err}")
finally:
    chart.close()

for p in problems:
    print("PROBLEM:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
