"""KubeRay manifests under cluster/kuberay/: the fields the ray.io/v1 CRDs and the operator's validation
(ray-operator/controllers/ray/utils/validation.go) require, plus the project's rules (scale to zero, GPU limits,
token auth, nothing exposed, secrets only by reference, entrypoint accepted by raydistill.sweep)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.paths import ROOT

KUBERAY = ROOT / "cluster" / "kuberay"
MANIFESTS = sorted(KUBERAY.rglob("*.yaml"))  # the S3 manifests and their GCS variants under gcs/
NAMESPACE = "raydistill"
# KubeRay: utils.MaxRayClusterNameLength = 53, MaxRayJobNameLength = 53 - 6 (suffix of the generated cluster).
MAX_RAYCLUSTER_NAME, MAX_RAYJOB_NAME = 53, 47
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SECRETISH = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|API_KEY", re.I)
RAY_START_RESOURCE_PARAMS = ("num-cpus", "num-gpus", "memory", "resources")


def _docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


ALL = [(p, d) for p in MANIFESTS for d in _docs(p)]


def _rel(path: Path) -> str:
    return path.relative_to(KUBERAY).as_posix()


def _of_kind(kind: str) -> list[tuple[Path, dict]]:
    return [(p, d) for p, d in ALL if d.get("kind") == kind]


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _pod_specs(spec: dict):
    """(where, pod template spec) of the head and every worker group of a RayClusterSpec."""
    yield "head", spec["headGroupSpec"]["template"]["spec"]
    for g in spec.get("workerGroupSpecs", []):
        yield g.get("groupName", "?"), g["template"]["spec"]


def check_ray_cluster_spec(spec: dict, where: str) -> None:
    """What the operator requires of a RayClusterSpec (CRD required fields + ValidateRayClusterSpec)."""
    assert isinstance(spec, dict), where
    assert spec.get("enableInTreeAutoscaling") is True, f"{where}: enableInTreeAutoscaling"
    version = spec.get("rayVersion")
    assert version and _version(version) >= (2, 52, 0), f"{where}: rayVersion >= 2.52.0 is needed for token auth"
    auth = spec.get("authOptions", {})
    assert auth.get("mode") == "token", f"{where}: authOptions.mode must be token"

    head = spec.get("headGroupSpec")
    assert isinstance(head, dict), f"{where}: headGroupSpec is required"
    groups = [("head", head)] + [(g.get("groupName"), g) for g in spec.get("workerGroupSpecs", [])]
    for name, g in groups:
        params = g.get("rayStartParams")
        assert isinstance(params, dict), f"{where}/{name}: rayStartParams is required (may be {{}})"
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()), (
            f"{where}/{name}: rayStartParams is map[string]string; quote the values"
        )
        assert "labels" not in params, f"{where}/{name}: use the group's labels field, not rayStartParams"
        if any(params.get(k) for k in RAY_START_RESOURCE_PARAMS):
            assert not g.get("resources"), f"{where}/{name}: resources in both rayStartParams and resources"
        template = g.get("template")
        assert isinstance(template, dict) and isinstance(template.get("spec"), dict), f"{where}/{name}: template.spec"
        containers = template["spec"].get("containers")
        assert isinstance(containers, list) and containers, f"{where}/{name}: at least one container"
        ray_container = containers[0]
        assert ray_container.get("name"), f"{where}/{name}: containers[0].name"
        image = ray_container.get("image", "")
        assert image and ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), (
            f"{where}/{name}: containers[0].image must be pinned, got {image!r}"
        )
        assert template["spec"].get("restartPolicy") in (None, "Never"), f"{where}/{name}: autoscaler v2 restartPolicy"

    assert head["rayStartParams"].get("num-cpus") == "0", f'{where}: no tasks on the head (num-cpus: "0")'
    assert head.get("serviceType", "ClusterIP") == "ClusterIP", f"{where}: head service must stay ClusterIP"
    assert not head.get("enableIngress"), f"{where}: no ingress"
    images = {g["template"]["spec"]["containers"][0]["image"] for _, g in groups}
    assert len(images) == 1, f"{where}: head and workers must run the same image, got {images}"

    workers = spec.get("workerGroupSpecs")
    assert isinstance(workers, list) and workers, f"{where}: workerGroupSpecs"
    names = [g.get("groupName") for g in workers]
    assert len(set(names)) == len(names), f"{where}: duplicate groupName"
    for g in workers:
        name = g.get("groupName")
        assert isinstance(name, str) and DNS1123.match(name), f"{where}: groupName {name!r}"
        for k in ("minReplicas", "maxReplicas", "replicas"):
            assert isinstance(g.get(k), int) and g[k] >= 0, f"{where}/{name}: {k} must be a non-negative int"
        assert g["minReplicas"] == 0, f"{where}/{name}: minReplicas 0 (scale to zero)"
        assert g["maxReplicas"] >= 1 and g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], f"{where}/{name}"
        assert not g.get("suspend"), f"{where}/{name}: cannot suspend a group with the autoscaler on"
    gpu_groups = [
        g
        for g in workers
        if int(g["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
        >= 1
    ]
    assert gpu_groups, f"{where}: needs a GPU worker group (limits nvidia.com/gpu)"

    for name, pod in _pod_specs(spec):
        for c in pod["containers"]:
            _check_env_by_reference(c, f"{where}/{name}/{c.get('name')}")


def _check_env_by_reference(container: dict, where: str) -> None:
    for e in container.get("env", []):
        if SECRETISH.search(e.get("name", "")):
            assert "valueFrom" in e and "value" not in e, f"{where}: {e['name']} must come from a Secret reference"
    for src in container.get("envFrom", []):
        assert set(src) <= {"secretRef", "configMapRef", "prefix"}, where


# ------------------------------------------------------------------ every manifest
def test_manifests_present():
    assert {"raycluster.yaml", "rayjob.yaml"} <= {p.name for p in MANIFESTS}
    assert _of_kind("RayCluster") and _of_kind("RayJob")


@pytest.mark.parametrize("path,doc", ALL, ids=[f"{_rel(p)}:{d.get('kind')}" for p, d in ALL])
def test_object_basics(path, doc):
    assert doc.get("apiVersion") and doc.get("kind"), path
    meta = doc.get("metadata", {})
    assert meta.get("name") and DNS1123.match(meta["name"]), f"{path}: metadata.name"
    assert meta.get("namespace") == NAMESPACE, f"{path}: {doc['kind']} belongs in namespace {NAMESPACE}"
    if doc["apiVersion"].startswith("ray.io/"):
        assert doc["apiVersion"] == "ray.io/v1", f"{path}: use ray.io/v1"


def test_nothing_exposed_outside_the_cluster():
    kinds = {d["kind"] for _, d in ALL}
    assert not kinds & {"Ingress", "Route", "Gateway", "HTTPRoute"}, kinds
    for p, d in _of_kind("Service"):
        assert d["spec"].get("type", "ClusterIP") == "ClusterIP", f"{p}: Service {d['metadata']['name']}"
        assert not d["spec"].get("externalIPs"), p


def test_secrets_only_by_reference():
    assert not _of_kind("Secret"), "Secrets are created with kubectl, never committed"
    for p, d in ALL:
        for c in _containers(d):
            _check_env_by_reference(c, f"{p.name}:{d['kind']}/{c.get('name')}")


def _containers(doc: dict):
    spec = doc.get("spec", {})
    if doc.get("kind") == "RayCluster":
        for _, pod in _pod_specs(spec):
            yield from pod["containers"]
    elif doc.get("kind") == "RayJob" and spec.get("rayClusterSpec"):
        for _, pod in _pod_specs(spec["rayClusterSpec"]):
            yield from pod["containers"]
    elif doc.get("kind") in ("Deployment", "StatefulSet", "Job"):
        yield from spec["template"]["spec"]["containers"]


# ------------------------------------------------------------------ RayCluster
def test_raycluster():
    for path, rc in _of_kind("RayCluster"):
        name = rc["metadata"]["name"]
        assert len(name) <= MAX_RAYCLUSTER_NAME and DNS1035.match(name), f"{path}: RayCluster name {name!r}"
        check_ray_cluster_spec(rc["spec"], f"{path.name}:{name}")


def test_ray_version_matches_dockerfile():
    dockerfile = ROOT / "cluster" / "Dockerfile"
    base = re.search(r"FROM rayproject/ray:([\d.]+)", dockerfile.read_text()) if dockerfile.exists() else None
    for path, d in _of_kind("RayCluster") + _of_kind("RayJob"):
        spec = d["spec"] if d["kind"] == "RayCluster" else d["spec"]["rayClusterSpec"]
        if base:
            assert spec["rayVersion"] == base.group(1), f"{path}: rayVersion vs cluster/Dockerfile base image"
        images = {c["image"] for _, pod in _pod_specs(spec) for c in pod["containers"]}
        assert len(images) == 1, f"{path}: one image for head and workers"


# ------------------------------------------------------------------ RayJob
def _mlflow_service_url() -> str | None:
    for _, svc in _of_kind("Service"):
        if svc["metadata"]["name"] == "mlflow":
            port = svc["spec"]["ports"][0]["port"]
            return f"http://mlflow.{svc['metadata']['namespace']}.svc.cluster.local:{port}"
    return None


def test_rayjob():
    for path, job in _of_kind("RayJob"):
        name = job["metadata"]["name"]
        assert len(name) <= MAX_RAYJOB_NAME and DNS1035.match(name), f"{path}: RayJob name {name!r}"
        spec = job["spec"]

        entrypoint = spec.get("entrypoint", "")
        assert "raydistill.sweep pkd_glue" in entrypoint, f"{path}: entrypoint"
        assert "$" not in entrypoint, f"{path}: the submitter pod's shell would expand $VARS; use runtime env_vars"
        argv = shlex.split(entrypoint)
        assert argv[:3] == ["python", "-m", "raydistill.sweep"], argv
        opts = dict(zip(argv[3:], argv[4:], strict=False))  # each flag with the word after it
        assert "--use-gpu" in argv, f"{path}: GPU sweep"
        storage = opts.get("--storage-path", "")
        assert urlparse(storage).scheme in ("s3", "gs"), (
            f"{path}: --storage-path must be object storage shared by all pods, got {storage!r}"
        )

        env = yaml.safe_load(spec.get("runtimeEnvYAML", ""))
        assert isinstance(env, dict), f"{path}: runtimeEnvYAML must parse to a mapping"
        assert set(env) <= {
            "working_dir",
            "pip",
            "uv",
            "conda",
            "env_vars",
            "py_modules",
            "excludes",
            "config",
            "container",
            "image_uri",
            "py_executable",
            "nsight",
        }, f"{path}: runtime env keys {set(env)}"
        uri = env.get("env_vars", {}).get("MLFLOW_TRACKING_URI")
        assert uri, f"{path}: runtime env sets MLFLOW_TRACKING_URI"
        assert all(isinstance(v, str) for v in env["env_vars"].values()), f"{path}: env_vars values are strings"
        host = urlparse(uri).hostname or ""
        assert host.endswith(".svc.cluster.local") or "." not in host, f"{path}: tracking server is in-cluster: {uri}"
        service = _mlflow_service_url()
        if service:
            assert uri == service, f"{path}: {uri} is not the Service in mlflow.yaml ({service})"
        if "--tracking-uri" in opts:
            assert opts["--tracking-uri"] == uri, f"{path}: --tracking-uri and MLFLOW_TRACKING_URI differ"
        if "working_dir" in env:
            wd = urlparse(env["working_dir"])
            assert wd.scheme in ("s3", "gs", "https") and wd.path.endswith(".zip"), (
                f"{path}: a RayJob's working_dir must be a remote .zip URI"
            )

        assert spec.get("shutdownAfterJobFinishes") is True, f"{path}: shutdownAfterJobFinishes"
        assert isinstance(spec.get("ttlSecondsAfterFinished", 0), int) and spec.get("ttlSecondsAfterFinished", 0) >= 0
        assert spec.get("activeDeadlineSeconds", 1) > 0 and spec.get("backoffLimit", 0) >= 0
        assert spec.get("submissionMode", "K8sJobMode") in ("K8sJobMode", "HTTPMode", "SidecarMode")
        has_spec, has_selector = bool(spec.get("rayClusterSpec")), bool(spec.get("clusterSelector"))
        assert has_spec != has_selector, f"{path}: exactly one of rayClusterSpec / clusterSelector"
        if has_spec:
            check_ray_cluster_spec(spec["rayClusterSpec"], f"{path.name}:{name}.rayClusterSpec")
        else:
            assert spec["clusterSelector"].get("ray.io/cluster"), f"{path}: clusterSelector needs ray.io/cluster"


def test_rayjob_entrypoint_accepted_by_sweep_cli():
    try:
        from raydistill.commands.sweep import parser
    except ImportError as e:  # the sweep module is developed in parallel
        pytest.skip(f"raydistill.sweep not importable: {e}")
    for path, job in _of_kind("RayJob"):
        argv = shlex.split(job["spec"]["entrypoint"])[3:]
        args = parser().parse_args(argv)
        assert args.space == "pkd_glue" and args.use_gpu and args.num_workers >= 1, path


# ------------------------------------------------------------------ MLflow
@pytest.mark.parametrize(
    "dep",
    [d for _, d in _of_kind("Deployment") if d["metadata"]["name"] == "mlflow"],
    ids=[_rel(p) for p, d in _of_kind("Deployment") if d["metadata"]["name"] == "mlflow"],
)
def test_mlflow_server(dep):
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = " ".join(c.get("command", []) + c.get("args", []))
    assert re.search(r"--artifacts-destination[= ](s3|gs)://", args), "artifacts go to object storage"
    backend = re.search(r"--backend-store-uri[= ](\S+)", args)
    if backend:
        uri = backend.group(1)
        assert uri.startswith(("sqlite:////", "postgresql")), uri
        if uri.startswith("sqlite:////"):
            db_dir = str(Path(uri[len("sqlite:///") :]).parent)
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            assert db_dir in mounts, f"SQLite file {uri} must live on a mounted volume"
            claims = {v["name"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}
            assert mounts[db_dir] in claims, "the SQLite volume must be a PersistentVolumeClaim"
            assert dep["spec"].get("replicas", 1) == 1 and dep["spec"].get("strategy", {}).get("type") == "Recreate"
    else:
        names = {e["name"]: e for e in c.get("env", [])}
        assert "valueFrom" in names.get("MLFLOW_BACKEND_STORE_URI", {}), "backend store URI from a Secret"
    service = _mlflow_service_url()
    assert service, "a Service named mlflow"
    host = urlparse(service).hostname
    allowed = re.search(r"--allowed-hosts[= ](\S+)", args)
    if allowed:  # MLflow >= 3.5 rejects Host headers it does not know (DNS-rebinding protection)
        assert f"{host}:*" in allowed.group(1).split(","), f"--allowed-hosts must admit {host}"


# ------------------------------------------------------------------ storage: S3 manifests and their GCS variants
GCS = KUBERAY / "gcs"


def _storage_uris(doc: dict) -> list[str]:
    """The object-store URIs a manifest hands to Ray or MLflow: a RayJob's --storage-path and working_dir, the MLflow
    server's --artifacts-destination."""
    if doc["kind"] == "RayJob":
        argv = shlex.split(doc["spec"]["entrypoint"])
        env = yaml.safe_load(doc["spec"].get("runtimeEnvYAML", "")) or {}
        return [argv[argv.index("--storage-path") + 1]] + ([env["working_dir"]] if "working_dir" in env else [])
    if doc["kind"] == "Deployment":
        args = doc["spec"]["template"]["spec"]["containers"][0].get("args", [])
        return [a.split("=", 1)[1] for a in args if a.startswith("--artifacts-destination=")]
    return []


def _swap_scheme(obj, old: str, new: str):
    if isinstance(obj, str):
        return obj.replace(old, new)
    if isinstance(obj, list):
        return [_swap_scheme(v, old, new) for v in obj]
    if isinstance(obj, dict):
        return {k: _swap_scheme(v, old, new) for k, v in obj.items()}
    return obj


def test_gcs_variants_present():
    assert {p.name for p in GCS.glob("*.yaml")} == {"rayjob.yaml", "mlflow.yaml"}


@pytest.mark.parametrize("name", ["rayjob.yaml", "mlflow.yaml"])
def test_gcs_variant_is_the_s3_manifest_with_gs_uris(name):
    """cluster/kuberay/gcs/NAME parses and is cluster/kuberay/NAME with every s3:// turned into gs:// (nothing else
    differs, so a change to one that is not made to the other fails here); the S3 one names only s3://."""
    s3, gcs = _docs(KUBERAY / name), _docs(GCS / name)
    s3_uris = [u for d in s3 for u in _storage_uris(d)]
    gcs_uris = [u for d in gcs for u in _storage_uris(d)]
    assert s3_uris and all(urlparse(u).scheme == "s3" for u in s3_uris), s3_uris
    assert len(gcs_uris) == len(s3_uris) and all(urlparse(u).scheme == "gs" for u in gcs_uris), gcs_uris
    assert all(urlparse(u).netloc == "REPLACE_WITH_YOUR_BUCKET" for u in s3_uris + gcs_uris)
    assert "s3://" not in yaml.safe_dump_all(gcs)
    assert gcs == _swap_scheme(s3, "s3://", "gs://")


def test_every_image_pinned():
    """Every container image in the manifests carries a version tag: no `latest`, no untagged image."""
    images = [(p, c["image"]) for p, d in ALL for c in _containers(d)]
    assert len(images) >= 4, images
    for p, image in images:
        name, _, tag = image.rpartition(":")
        assert name and "/" not in tag and tag != "latest" and re.match(r"\d+\.\d+\.\d+$", tag), (
            f"{_rel(p)}: image {image!r} must be pinned to a version tag"
        )
