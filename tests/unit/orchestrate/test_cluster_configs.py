"""Ray cluster launcher configs under cluster/*.yaml: Ray's own schema validation plus the project's rules
(scale to zero, idle timeout, spot with on-demand fallback, no credentials, dashboard not public, token
auth, torch pinned like constraints.txt)."""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT

CLUSTER = ROOT / "cluster"
LAUNCHER_CONFIGS = sorted(CLUSTER.glob("*.yaml"))
IDS = [p.name for p in LAUNCHER_CONFIGS]
# Ports that must never be opened to the outside: dashboard / job API, MLflow, GCS, Ray client,
# dashboard agent, metrics.
PRIVATE_PORTS = {8265, 5000, 6379, 10001, 52365, 8080}
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def _torch_pin() -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if re.match(r"^torch\s*==", line):
            return line.replace(" ", "").split("==", 1)[1]
    raise AssertionError("constraints.txt pins no torch version")


TORCH = _torch_pin()


def _load(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _prepared(raw: dict) -> dict:
    from ray.autoscaler._private.util import prepare_config

    return prepare_config(copy.deepcopy(raw))


@pytest.fixture(params=LAUNCHER_CONFIGS, ids=IDS)
def cfg_path(request) -> Path:
    return request.param


def _workers(cfg: dict) -> dict:
    return {k: v for k, v in cfg["available_node_types"].items() if k != cfg["head_node_type"]}


def _start_cmds(cfg: dict, key: str) -> str:
    return "\n".join(cfg.get(key, []))


# ------------------------------------------------------------------ Ray's own validation
def test_expected_configs_present():
    assert {"aws-gpu.yaml", "gcp-gpu.yaml"} <= set(IDS)


def test_ray_schema_validation(cfg_path):
    from ray.autoscaler._private.util import validate_config

    raw = _load(cfg_path)
    validate_config(copy.deepcopy(raw))  # the file as written
    prepared = _prepared(raw)
    validate_config(prepared)  # after Ray merges its provider defaults, as `ray up` does
    assert prepared["provider"]["type"] in {"aws", "gcp"}
    assert prepared["head_node_type"] in prepared["available_node_types"]


def test_autoscaler_v2_reads_node_types(cfg_path):
    """The head runs autoscaler v2 (the default for `ray up` since Ray 2.50); it must parse every node type."""
    from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig

    prepared = _prepared(_load(cfg_path))
    node_types = AutoscalingConfig(prepared, skip_content_hash=True).get_node_type_configs()
    assert set(node_types) == set(prepared["available_node_types"])
    for name, nt in node_types.items():
        if name != prepared["head_node_type"]:
            assert nt.min_worker_nodes == 0 and nt.max_worker_nodes >= 1, name


# ------------------------------------------------------------------ cost: scale to zero, idle timeout, spot
def test_worker_types_scale_to_zero(cfg_path):
    raw = _load(cfg_path)
    workers = _workers(raw)
    assert workers, "no worker node types"
    for name, nt in workers.items():
        assert nt.get("min_workers") == 0, f"{name}: min_workers must be 0 (explicitly)"
        assert nt.get("max_workers", 0) >= 1, f"{name}: max_workers must be >= 1"
    assert sum(nt["max_workers"] for nt in workers.values()) >= raw["max_workers"] >= 1


def test_idle_timeout_set(cfg_path):
    raw = _load(cfg_path)
    assert 0 < raw.get("idle_timeout_minutes", 0) <= 60


def test_head_runs_no_tasks(cfg_path):
    raw = _load(cfg_path)
    head = raw["available_node_types"][raw["head_node_type"]]
    assert head["resources"].get("CPU") == 0 and not head["resources"].get("GPU")
    assert head.get("max_workers", 0) == 0 and head.get("min_workers", 0) == 0
    assert re.search(r"--num-cpus[= ]0\b", _start_cmds(raw, "head_start_ray_commands"))


def _is_spot(provider: str, node_config: dict) -> bool:
    if provider == "aws":
        return node_config.get("InstanceMarketOptions", {}).get("MarketType") == "spot"
    scheduling = node_config.get("scheduling", {})
    assert isinstance(scheduling, dict), "GCP scheduling is an object, not a list"
    return scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible") is True


def test_spot_with_on_demand_fallback(cfg_path):
    raw = _load(cfg_path)
    provider = raw["provider"]["type"]
    shapes: dict[tuple, dict[bool, tuple[str, dict]]] = {}
    for name, nt in _workers(raw).items():
        assert nt["resources"].get("GPU", 0) >= 1, f"{name}: GPU workers declare their GPUs"
        key = tuple(sorted(nt["resources"].items()))
        spot = _is_spot(provider, nt["node_config"])
        market = "spot" if spot else "on-demand"
        assert spot not in shapes.setdefault(key, {}), f"{name}: two {market} types of one shape"
        shapes[key][spot] = (name, nt)
    assert len(shapes) >= 2, "want a multi-GPU DDP shape and a small packing shape"
    assert any(dict(k)["GPU"] >= 4 for k in shapes) and any(dict(k)["GPU"] == 1 for k in shapes)
    for key, pair in shapes.items():
        assert set(pair) == {True, False}, f"{dict(key)}: needs a spot type and an on-demand fallback type"
        (spot_name, spot), (od_name, od) = pair[True], pair[False]
        assert spot.get("priority", 0) > od.get("priority", 0), f"{spot_name} must outrank {od_name}"

        def strip(c):
            return {k: v for k, v in c.items() if k not in ("InstanceMarketOptions", "scheduling")}

        assert strip(spot["node_config"]) == strip(od["node_config"]), f"{spot_name}/{od_name} differ beyond the market"
        if provider == "gcp":  # GPUs on GCE cannot live-migrate
            for c in (spot["node_config"], od["node_config"]):
                assert c["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_autoscaler_prefers_spot_then_falls_back(cfg_path):
    """Replays Ray 2.60's autoscaler v2 scheduler on this config: spot first; on-demand when the spot type is
    marked unavailable (after an allocation timeout) or full."""
    sched = pytest.importorskip("ray.autoscaler.v2.scheduler")
    from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig
    from ray.autoscaler.v2.utils import ResourceRequestUtil
    from ray.core.generated.autoscaler_pb2 import ResourceRequestByCount

    raw = _load(cfg_path)
    provider = raw["provider"]["type"]
    prepared = _prepared(raw)
    node_types = AutoscalingConfig(prepared, skip_content_hash=True).get_node_type_configs()

    def pair(gpus: int) -> tuple[str, str, int]:
        types = {n: nt for n, nt in _workers(raw).items() if nt["resources"]["GPU"] == gpus}
        spot = next(n for n, nt in types.items() if _is_spot(provider, nt["node_config"]))
        return spot, next(n for n in types if n != spot), types[spot]["max_workers"]

    def launch(bundle: dict, count: int, **kw) -> dict:
        req = ResourceRequestByCount(request=ResourceRequestUtil.make(bundle), count=count)
        try:
            request = sched.SchedulingRequest(
                node_type_configs=node_types,
                max_num_nodes=prepared["max_workers"],
                resource_requests=[req],
                disable_launch_config_check=True,
                **kw,
            )
        except TypeError as e:  # internal API of another Ray version
            pytest.skip(f"Ray's internal SchedulingRequest changed: {e}")
        reply = sched.ResourceDemandScheduler().schedule(request)
        return {r.instance_type: r.count for r in reply.to_launch}

    small_spot, small_od, _ = pair(1)
    assert launch({"GPU": 1, "CPU": 1}, 1) == {small_spot: 1}
    assert launch({"GPU": 1, "CPU": 1}, 1, recoverable_resource_availabilities={small_spot: 0.0}) == {small_od: 1}
    # a 4-GPU DDP trial (placement group bundle) fits only the multi-GPU types
    big_spot, big_od, big_max = pair(4)
    ddp = {"GPU": 4, "CPU": 4}
    assert launch(ddp, 1) == {big_spot: 1}
    assert launch(ddp, 1, recoverable_resource_availabilities={big_spot: 0.0}) == {big_od: 1}
    assert launch(ddp, big_max + 1) == {big_spot: big_max, big_od: 1}  # spot type full: overflow


# ------------------------------------------------------------------ security
CREDENTIAL_PATTERNS = {
    "AWS secret key name": re.compile(r"aws_secret_access_key", re.I),
    "AWS access key name": re.compile(r"aws_access_key_id", re.I),
    "AWS session token name": re.compile(r"aws_session_token", re.I),
    "AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key block": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "GCP service-account key": re.compile(r"\"(private_key|private_key_id)\"\s*:"),
    "GCP service-account JSON": re.compile(r"\"type\"\s*:\s*\"service_account\""),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    "literal Ray token": re.compile(r"RAY_AUTH_TOKEN\s*[=:]\s*[\"']?[A-Za-z0-9+/_.-]{8,}"),
    "inline password": re.compile(r"password\s*[=:]\s*[\"']?[^\s\"'$<{]{4,}", re.I),
    "credentials in a URL": re.compile(r"://[^/\s:@]+:[^/\s@$]+@"),
}


def test_no_credentials_under_cluster():
    files = [p for p in CLUSTER.rglob("*") if p.is_file()]
    assert files
    hits = []
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        for what, rx in CREDENTIAL_PATTERNS.items():
            for m in rx.finditer(text):
                hits.append(f"{p.relative_to(ROOT)}: {what}: {m.group(0)[:40]!r}")
    assert not hits, "credentials-like content:\n" + "\n".join(hits)


def test_no_credentials_in_provider(cfg_path):
    provider = _load(cfg_path)["provider"]
    assert "aws_credentials" not in provider and "gcp_credentials" not in provider


def test_dashboard_not_public(cfg_path):
    raw = _load(cfg_path)
    head = _start_cmds(raw, "head_start_ray_commands")
    hosts = re.findall(r"--dashboard-host[= ](\S+)", head)
    assert hosts and all(h.strip("'\"") in ("127.0.0.1", "localhost") for h in hosts), hosts
    everything = yaml.safe_dump(raw)
    assert not re.search(r"dashboard-host[= ]['\"]?0\.0\.0\.0", everything)
    assert "--include-dashboard=false" not in everything  # `ray dashboard` / job submission need it


def test_no_inbound_rule_opens_private_ports(cfg_path):
    raw = _load(cfg_path)
    provider = raw["provider"]
    for rule in provider.get("security_group", {}).get("IpPermissions", []):
        lo, hi = rule.get("FromPort", -1), rule.get("ToPort", -1)
        opened = set(range(0, 65536)) if lo in (-1, None) else set(range(lo, hi + 1))
        assert not opened & PRIVATE_PORTS, f"security group opens {sorted(opened & PRIVATE_PORTS)}"
        for r in rule.get("IpRanges", []) + rule.get("Ipv6Ranges", []):
            assert r.get("CidrIp", r.get("CidrIpv6")) not in ("0.0.0.0/0", "::/0"), "rule open to the internet"
    assert "0.0.0.0/0" not in yaml.safe_dump(raw)


def test_token_auth_on_every_node(cfg_path):
    raw = _load(cfg_path)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert "RAY_AUTH_MODE=token" in _start_cmds(raw, key), key
    mounts = raw.get("file_mounts", {})
    assert any(
        remote.endswith("/.ray/auth_token") and local == "~/.ray/auth_token" for remote, local in mounts.items()
    ), mounts
    for p in CLUSTER.rglob("*"):
        if p.is_file():
            assert not re.search(r"RAY_AUTH_MODE\s*[=:]\s*[\"']?disabled", p.read_text(errors="replace")), p


# ------------------------------------------------------------------ software: torch pinned like constraints.txt
def _torch_requirements(cmd: str) -> list[str]:
    """Every torch requirement in a pip/uv install command (not torchvision, not the index URL)."""
    if "install" not in cmd:
        return []
    cmd = re.sub(r"https?://\S+", "", cmd)
    return re.findall(r"(?<![\w./-])torch(?![\w-])(?:\s*[=<>!~]=?\s*[\w.+*]+)?", cmd)


def _effective_setup(prepared: dict, node_type: str) -> list[str]:
    nt = prepared["available_node_types"][node_type]
    if node_type == prepared["head_node_type"]:
        return prepared["head_setup_commands"]
    return nt.get("worker_setup_commands", prepared["worker_setup_commands"])


def test_torch_pinned_in_setup_commands(cfg_path):
    raw = _load(cfg_path)
    prepared = _prepared(raw)
    all_cmds = [
        c
        for k in ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands")
        for c in raw.get(k, [])
    ]
    all_cmds += [c for nt in raw["available_node_types"].values() for c in nt.get("worker_setup_commands", [])]
    for cmd in all_cmds:
        for req in _torch_requirements(cmd):
            assert req.replace(" ", "") == f"torch=={TORCH}", f"unpinned or mispinned torch: {req!r} in {cmd!r}"
    for node_type in prepared["available_node_types"]:
        cmds = _effective_setup(prepared, node_type)
        torch_i = [i for i, c in enumerate(cmds) if f"torch=={TORCH}" in c]
        pkg_i = [i for i, c in enumerate(cmds) if re.search(r"install .*-c \S*constraints\.txt", c)]
        assert torch_i and pkg_i, f"{node_type}: needs torch=={TORCH} and a `-c constraints.txt` install"
        assert torch_i[0] < pkg_i[0], f"{node_type}: install torch before the package so the pin is met"
        index = re.search(re.escape(PYTORCH_INDEX) + r"(\w+)", cmds[torch_i[0]])
        assert index, f"{node_type}: torch must come from the PyTorch index ({PYTORCH_INDEX}...)"
        gpu = prepared["available_node_types"][node_type]["resources"].get("GPU", 0)
        if gpu:
            assert index.group(1).startswith("cu"), f"{node_type}: GPU node needs a CUDA build, got {index.group(1)}"
        else:
            assert index.group(1) == "cpu", f"{node_type}: CPU node should get the CPU build"
        assert any("-e " in cmds[i] or "--editable" in cmds[i] for i in pkg_i), (
            f"{node_type}: install the package editable (a job's --working-dir code is what runs)"
        )


def test_ray_version_pinned_consistently():
    """The nodes, the image and the KubeRay manifests run one Ray version; `ray up` / `ray job submit` want the
    client on the same version (a mismatch with this interpreter's Ray is reported as a warning)."""
    import warnings

    import ray

    versions = {}
    for p in LAUNCHER_CONFIGS:
        for v in re.findall(r"ray\[[\w,]+\]==([\w.]+)", p.read_text()):
            versions.setdefault(v, []).append(p.name)
    for p in CLUSTER.rglob("*"):
        if p.is_file() and p.suffix in ("", ".yaml"):
            text = p.read_text(errors="replace")
            for v in re.findall(r"rayproject/ray:([\d.]+)", text) + re.findall(r"rayVersion:\s*[\"']?([\d.]+)", text):
                versions.setdefault(v, []).append(p.name)
    assert len(versions) == 1, f"Ray versions differ across cluster/: {versions}"
    (pinned,) = versions
    if pinned != ray.__version__:
        warnings.warn(
            f"cluster/ pins Ray {pinned} but this environment has Ray {ray.__version__}; "
            "the client submitting jobs should match the cluster",
            stacklevel=1,
        )


def test_dockerfile_pins_like_constraints():
    dockerfile = CLUSTER / "Dockerfile"
    if not dockerfile.exists():
        pytest.skip("no cluster/Dockerfile")
    text = dockerfile.read_text()
    reqs = [r for line in text.splitlines() for r in _torch_requirements(line)]
    assert reqs and all(r.replace(" ", "") == f"torch=={TORCH}" for r in reqs), reqs
    assert re.search(r"-c constraints\.txt", text)


# ------------------------------------------------------------------ pinned versions, no `curl | sh`, placeholders first
# docs/CLUSTER.md, "Pinned versions and how to bump them". Options of `pip install` that take a value (the value is not
# a requirement).
PIP_OPTS_WITH_VALUE = {
    "-c",
    "--constraint",
    "-r",
    "--requirement",
    "-e",
    "--editable",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--python-version",
    "--platform",
}
PINNED_REQ = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?==[0-9][\w.+!-]*$")
PIPE_TO_SHELL = re.compile(r"\b(curl|wget)\b[^\n|;&]*\|\s*(sudo\s+)?(\S*/)?(ba|z|da)?sh\b")
PLACEHOLDER_GUARD = re.compile(r'case "\$\w+" in \*REPLACE_WITH_\*\) echo "[^"]+" >&2; exit 1;; esac')


def _all_commands(raw: dict) -> list[str]:
    keys = (
        "initialization_commands",
        "setup_commands",
        "head_setup_commands",
        "worker_setup_commands",
        "head_start_ray_commands",
        "worker_start_ray_commands",
    )
    cmds = [c for k in keys for c in raw.get(k, [])]
    return cmds + [c for nt in raw["available_node_types"].values() for c in nt.get("worker_setup_commands", [])]


def _dockerfile_runs() -> list[str]:
    """The RUN instructions of cluster/Dockerfile, continuation lines joined and ARG defaults substituted."""
    text = (CLUSTER / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    joined = re.sub(r"\\\n", " ", text)
    runs = [ln[len("RUN ") :] for ln in joined.splitlines() if ln.startswith("RUN ")]
    return [re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), r) for r in runs]


def _pip_installs(cmd: str) -> list[list[str]]:
    """The arguments of every `pip install` / `uv pip install` in a shell command."""
    out = []
    for m in re.finditer(r"\bpip\s+install\b", cmd):
        rest = re.split(r"&&|\|\||;|\)|\n", cmd[m.end() :], maxsplit=1)[0]
        out.append(shlex.split(rest))
    return out


def _requirements(args: list[str]) -> tuple[list[str], dict]:
    reqs, opts, it = [], {}, iter(args)
    for a in it:
        if a in PIP_OPTS_WITH_VALUE:
            opts.setdefault(a, []).append(next(it))
        elif a.startswith("-"):
            opts.setdefault(a.split("=", 1)[0], []).append(a.partition("=")[2])
        else:
            reqs.append(a)
    return reqs, opts


def _install_sources() -> list[tuple[str, str]]:
    """(where, command) of every command in the launcher configs and every RUN of the Dockerfile."""
    out = [(p.name, c) for p in LAUNCHER_CONFIGS for c in _all_commands(_load(p))]
    return out + [("Dockerfile", r) for r in _dockerfile_runs()]


def test_every_pip_install_is_pinned():
    """Each requirement named in a `pip install` under cluster/ is NAME==VERSION; an editable install of the package
    carries `-c constraints.txt` (its dependencies pinned there); one version per package across the files, and the
    version of constraints.txt where that pins it too."""
    constraints = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    constraints = {k.lower().replace("_", "-"): v for k, v in constraints.items()}
    seen: dict[str, set] = {}
    n = 0
    for where, cmd in _install_sources():
        for args in _pip_installs(cmd):
            reqs, opts = _requirements(args)
            n += 1
            for r in reqs:
                assert PINNED_REQ.match(r), f"{where}: unpinned requirement {r!r} in {cmd!r}"
                name, version = re.sub(r"\[.*\]", "", r).split("==")
                seen.setdefault(name.lower().replace("_", "-"), set()).add(version)
            if "-e" in opts or "--editable" in opts:
                assert any(c.endswith("constraints.txt") for c in opts.get("-c", []) + opts.get("--constraint", [])), (
                    f"{where}: an editable install needs -c constraints.txt: {cmd!r}"
                )
    assert n >= 9, f"found only {n} pip installs: the parser missed some"
    assert {"uv", "boto3", "google-cloud-storage", "psycopg", "mlflow", "torch", "ray"} <= set(seen), seen
    for name, versions in seen.items():
        assert len(versions) == 1, f"{name} pinned to {sorted(versions)} in different places under cluster/"
        if name in constraints:
            assert versions == {constraints[name]}, (
                f"{name}: {versions} under cluster/, {constraints[name]} in constraints.txt"
            )


def test_mlflow_image_pins_its_extras_and_constraints():
    """The MLflow server image: mlflow, boto3, google-cloud-storage, psycopg[binary] each ==, MLflow's own dependencies
    through constraints.txt, and a base image pinned to a patch release."""
    text = (CLUSTER / "Dockerfile").read_text()
    stage = text.split("AS mlflow-server", 1)[1].split("\nFROM ", 1)[0]
    installs = [args for r in _dockerfile_runs() if "mlflow==" in r for args in _pip_installs(r)]
    (args,) = installs
    reqs, opts = _requirements(args)
    assert {re.sub(r"==.*", "", r) for r in reqs} == {"mlflow", "boto3", "google-cloud-storage", "psycopg[binary]"}
    assert opts.get("-c") == ["/tmp/constraints.txt"] and "COPY constraints.txt /tmp/constraints.txt" in stage
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        tag = base.rsplit(":", 1)[-1] if ":" in base.rsplit("/", 1)[-1] else ""
        assert re.match(r"\d+\.\d+\.\d+", tag), f"base image {base} must carry a patch-release tag (not latest)"


def test_no_pipe_to_shell_under_cluster():
    files = [p for p in CLUSTER.rglob("*") if p.is_file()]
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in files for m in PIPE_TO_SHELL.finditer(p.read_text())]
    assert not hits, "download piped into a shell:\n" + "\n".join(hits)
    assert PIPE_TO_SHELL.search("curl -LsSf https://astral.sh/uv/install.sh | sh")  # the pattern catches the old form


def test_uv_from_pypi_and_python_build_pinned(cfg_path):
    raw = _load(cfg_path)
    setup = "\n".join(raw["setup_commands"])
    assert re.search(r"pip install [^\n]*\"uv==\d+\.\d+\.\d+\"", setup), "uv from PyPI at a pinned version"
    pythons = re.findall(r"uv venv [^\n]*--python (\S+)", setup)
    assert pythons and all(re.fullmatch(r"3\.\d+\.\d+", v) for v in pythons), f"pin the patch release: {pythons}"


def test_machine_images_pinned_not_latest(cfg_path):
    """One image per role, named by id / image name: no `latest`, no SSM `latest` alias, no GCE image family."""
    raw = _load(cfg_path)
    provider = raw["provider"]["type"]
    images = {}
    for name, nt in raw["available_node_types"].items():
        if provider == "aws":
            images[name] = nt["node_config"]["ImageId"]
        else:
            (disk,) = [d for d in nt["node_config"]["disks"] if d.get("boot")]
            images[name] = disk["initializeParams"]["sourceImage"]
    for name, image in images.items():
        assert "latest" not in image.lower() and "/family/" not in image, f"{name}: {image} moves over time"
        if provider == "aws":
            assert re.fullmatch(r"ami-[0-9a-f]{8,17}|REPLACE_WITH_PINNED_AMI_ID|resolve:ssm:\S+:\d+", image), image
        else:
            assert re.fullmatch(
                r"projects/[a-z-]+/global/images/([a-z][-a-z0-9]{0,62}|REPLACE_WITH_PINNED_\w+)", image
            ), image
    workers = {images[n] for n in _workers(raw)}
    assert len(workers) == 1, f"all GPU worker types boot one image: {workers}"
    if provider == "aws":
        assert len(set(images.values())) == 1, "head and workers share the AMI (one &ami anchor)"


def test_placeholder_checked_first_before_any_install(cfg_path, tmp_path):
    """The first initialization command stops with one line naming the placeholder while the bucket is not set, and
    records the artifact store once it is; no other command carries a placeholder, and nothing is installed before."""
    raw = _load(cfg_path)
    ordered = raw["initialization_commands"] + raw["setup_commands"] + raw["head_setup_commands"]
    guard = ordered[0]
    assert PLACEHOLDER_GUARD.search(guard), f"first initialization command must be the placeholder check: {guard!r}"
    assert "install" not in guard
    for cmd in _all_commands(raw):
        if cmd is not guard:
            assert "REPLACE_WITH_" not in cmd, f"placeholder outside the first check: {cmd!r}"
    assert "~/mlflow/artifacts_destination" in _start_cmds(raw, "head_start_ray_commands")

    scheme = {"aws": "s3", "gcp": "gs"}[raw["provider"]["type"]]
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}

    def run(c):
        return subprocess.run(["bash", "-c", c], env=env, capture_output=True, text=True, timeout=30)

    refused = run(guard)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "replace REPLACE_WITH_YOUR_BUCKET" in refused.stderr, refused.stderr
    assert refused.stderr.startswith(f"cluster/{cfg_path.name}: ")
    assert not (tmp_path / "mlflow").exists()
    ok = run(guard.replace("REPLACE_WITH_YOUR_BUCKET", "my-bucket"))
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    assert (
        tmp_path / "mlflow" / "artifacts_destination"
    ).read_text() == f"{scheme}://my-bucket/raydistill/mlflow-artifacts\n"
