"""Unsafe defaults stay off: no remote code, no pickle of user files, loopback-only dashboards and UIs, no
credentials in the repository. Static checks read the package source with ``ast``; the behavioural one loads a
model folder that asks for custom code and checks that none of it ran."""

from __future__ import annotations

import ast
import inspect
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGE = ROOT / "raydistill"
SOURCES = sorted(PACKAGE.rglob("*.py"))
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _calls(paths=SOURCES):
    """(path, ast.Call) for every call in ``paths``."""
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                yield path, node


def _name(func) -> str:
    """Dotted name of a call target: ``torch.load``, ``ray.init``, ``load`` …"""
    if isinstance(func, ast.Attribute):
        return f"{_name(func.value) or '<expr>'}.{func.attr}"  # model.eval() is not eval()
    return func.id if isinstance(func, ast.Name) else ""


def _kw(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _where(path, node) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def test_sources_found():
    assert len(SOURCES) > 20 and PACKAGE / "models" / "encoder.py" in SOURCES


# ------------------------------------------------------------------ remote code
def test_trust_remote_code_is_never_switched_on():
    bad = []
    for path, call in _calls():
        v = _kw(call, "trust_remote_code")
        if v is not None and not (isinstance(v, ast.Name) or (isinstance(v, ast.Constant) and v.value is False)):
            bad.append(_where(path, call))  # only False or a pass-through parameter (whose default is False)
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        bad += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in re.finditer(r"trust_remote_code\s*=\s*True", text)]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args + node.args.kwonlyargs
                defaults = (
                    [None] * (len(node.args.args) - len(node.args.defaults))
                    + node.args.defaults
                    + node.args.kw_defaults
                )
                for arg, default in zip(args, defaults, strict=True):
                    if arg.arg == "trust_remote_code":
                        if not (isinstance(default, ast.Constant) and default.value is False):
                            bad.append(f"{_where(path, node)}: default of trust_remote_code is not False")
    assert not bad, "trust_remote_code switched on:\n" + "\n".join(bad)


def test_loaders_default_to_no_remote_code():
    from raydistill.models.encoder import load_model
    from raydistill.train.preflight import teacher_config

    for fn in (load_model, teacher_config):
        assert inspect.signature(fn).parameters["trust_remote_code"].default is False


EVIL = """
import pathlib
pathlib.Path(MARKER).write_text("custom code was executed")  # transformers runs a copy: the path is absolute
from transformers import BertConfig, BertForSequenceClassification


class EvilConfig(BertConfig):
    model_type = "evil-custom"


class EvilModel(BertForSequenceClassification):
    config_class = EvilConfig
"""


@pytest.mark.parametrize("model_type", ["bert", "evil-custom"])
def test_model_folder_with_custom_code_never_runs_it(tiny_teacher, tmp_path, model_type):
    """A folder whose config.json points at its own Python code (``auto_map``) loads with the built-in BERT class
    or is refused with one line, and its code never runs."""
    from raydistill.common.errors import UserError
    from raydistill.models.encoder import load_model
    from raydistill.train.preflight import teacher_config

    d = tmp_path / f"custom-{model_type}"
    shutil.copytree(tiny_teacher("classification"), d)
    marker = tmp_path / "REMOTE_CODE_RAN"
    (d / "evil.py").write_text(EVIL.replace("MARKER", repr(str(marker))))
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(
        model_type=model_type,
        auto_map={
            "AutoConfig": "evil.EvilConfig",
            "AutoModel": "evil.EvilModel",
            "AutoModelForSequenceClassification": "evil.EvilModel",
        },
    )
    (d / "config.json").write_text(json.dumps(cfg))
    if model_type == "bert":
        model = load_model(str(d), "classification")
        assert type(model).__name__ == "BertForSequenceClassification"
        assert teacher_config(str(d)).model_type == "bert"
    else:
        with pytest.raises(UserError) as e:
            load_model(str(d), "classification")
        assert e.value.field == "teacher"
        with pytest.raises(UserError):
            teacher_config(str(d))
    assert not marker.exists(), "the model folder's own code was executed"
    from transformers.utils import HF_MODULES_CACHE

    assert not (Path(HF_MODULES_CACHE) / "transformers_modules" / d.name).exists(), "custom code was copied to run"


# ------------------------------------------------------------------ deserialisation
def test_torch_load_is_weights_only():
    loads = [(p, c) for p, c in _calls() if _name(c.func) == "torch.load"]
    assert loads, "the scan should see the checkpoint loader in checkpoint.py"
    bad = [
        _where(p, c)
        for p, c in loads
        if not (isinstance(_kw(c, "weights_only"), ast.Constant) and _kw(c, "weights_only").value is True)
    ]
    assert not bad, "torch.load without weights_only=True:\n" + "\n".join(bad)
    for path in SOURCES:  # no aliasing around the check (from torch import load / torch.load as …)
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"from\s+torch\s+import\s+[^\n]*\bload\b", text), path
        assert not re.search(r"=\s*torch\.load\b(?!\()", text), path


UNSAFE_CALLS = {
    "pickle.load",
    "pickle.loads",
    "pickle.Unpickler",
    "cPickle.load",
    "dill.load",
    "dill.loads",
    "cloudpickle.load",
    "cloudpickle.loads",
    "joblib.load",
    "pandas.read_pickle",
    "pd.read_pickle",
    "yaml.load",
    "yaml.unsafe_load",
    "yaml.full_load",
    "marshal.load",
    "marshal.loads",
    "shelve.open",
    "eval",
    "exec",
}


def test_no_unsafe_deserialisation_in_the_package():
    bad = [f"{_where(p, c)}: {_name(c.func)}" for p, c in _calls() if _name(c.func) in UNSAFE_CALLS]
    bad += [
        f"{_where(p, c)}: np.load(allow_pickle=True)"
        for p, c in _calls()
        if _name(c.func).endswith("load")
        and isinstance(_kw(c, "allow_pickle"), ast.Constant)
        and _kw(c, "allow_pickle").value is True
    ]
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                bad += [
                    f"{_where(path, node)}: imports {n}"
                    for n in names
                    if n
                    and n.split(".")[0] in ("pickle", "cPickle", "dill", "cloudpickle", "joblib", "marshal", "shelve")
                ]
    assert not bad, "unsafe deserialisation:\n" + "\n".join(bad)


# ------------------------------------------------------------------ network exposure
def test_ray_dashboard_binds_to_loopback():
    inits = [(p, c) for p, c in _calls(SOURCES + sorted((ROOT / "tests").glob("*.py"))) if _name(c.func) == "ray.init"]
    assert inits, "no ray.init call found"
    bad = []
    for p, c in inits:
        if _kw(c, "address") is not None:
            continue  # joins a running cluster: its dashboard was bound by `ray start --dashboard-host`
        host, dash = _kw(c, "dashboard_host"), _kw(c, "include_dashboard")
        off = isinstance(dash, ast.Constant) and dash.value is False
        if not off and not (isinstance(host, ast.Constant) and host.value in LOOPBACK):
            bad.append(_where(p, c))
    assert not bad, "ray.init without dashboard_host='127.0.0.1':\n" + "\n".join(bad)


def test_no_wildcard_bind_in_the_package():
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in SOURCES
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "0.0.0.0" in line
    ]
    assert not hits, "0.0.0.0 in the package:\n" + "\n".join(hits)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_docs_mention_wildcard_binds_only_as_a_warning():
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in DOCS
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "0.0.0.0" in line and not re.search(r"warn|never|do not|don't|avoid|not\b", line, re.I)
    ]
    assert not hits, "docs show a wildcard bind without a warning:\n" + "\n".join(hits)


def test_mlflow_ui_commands_in_docs_stay_on_loopback():
    from mlflow import cli

    default = next(p.default for p in cli.cli.commands["server"].params if p.name == "host")
    assert default in LOOPBACK  # `mlflow ui`/`mlflow server` without --host listens on loopback only
    commands = [
        (p, line)
        for p in DOCS
        for line in p.read_text(encoding="utf-8").splitlines()
        if re.search(r"\bmlflow (ui|server)\b", line)
    ]
    assert any("--host 127.0.0.1" in line for p, line in commands if p.name == "README.md")
    bad = []
    for p, line in commands:
        host = re.search(r"--host[= ]+(\S+)", line)
        if host and host.group(1).strip("`'\"") not in LOOPBACK:
            bad.append(f"{p.relative_to(ROOT)}: {line.strip()}")
    assert not bad, "MLflow UI/server exposed beyond loopback:\n" + "\n".join(bad)


# ------------------------------------------------------------------ credentials
SECRETS = {
    "AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "AWS secret key value": re.compile(r"aws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}", re.I),
    "private key block": re.compile("-----BEGIN " + r"[A-Z ]*PRIVATE KEY-----"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    # a value of 24+ key characters, digits among them (not a dotted name, a $VAR, a <placeholder> or {…})
    "token value": re.compile(r"\b\w*token[\"']?\s*[:=]\s*[\"']?(?=[A-Za-z_+/=-]*\d)[A-Za-z0-9_+/=-]{24,}", re.I),
    "credentials in a URL": re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@$<{]+:[^/\s@$<{]+@"),
}


def test_no_credentials_in_committed_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    files = [ROOT / f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]
    assert files
    hits = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for what, rx in SECRETS.items():
            hits += [f"{f.relative_to(ROOT)}: {what}: {m.group(0)[:30]!r}" for m in rx.finditer(text)]
    assert not hits, "credential-like content in committed files:\n" + "\n".join(hits)


def test_secret_patterns_catch_what_they_should():
    fake_key = "AKIA" + "ABCDEFGHIJKLMNOP"
    samples = {
        "AWS access key id": f"key = {fake_key}",
        "token value": "auth_token: " + "3f9a8c7b6d5e4f3a2b1c0d9e8f7a6b5c",
        "private key block": "-----BEGIN " + "RSA PRIVATE KEY-----",
        "credentials in a URL": "postgresql://mlflow:" + "s3cret@db:5432/mlflow",
    }
    for what, text in samples.items():
        assert SECRETS[what].search(text), what
    for harmless in (
        "token: see section 2",
        'export RAY_AUTH_TOKEN="$(kubectl get secret)"',
        'token:          {"tokens": list[str]}',
        "sqlite:////abs/path/mlflow.db",
        '"token": tf.AutoModelForTokenClassification_with_a_long_name',
    ):
        assert not any(rx.search(harmless) for rx in SECRETS.values()), harmless
