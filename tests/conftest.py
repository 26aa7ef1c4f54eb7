"""Shared fixtures: one Ray instance per test session, tiny teachers, small synthetic task folders."""

from __future__ import annotations

import os
import random
import signal
import tempfile

import pytest

os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")  # report() waits on it; tiny runs want it short
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAYDISTILL_CACHE_DIR", tempfile.mkdtemp(prefix="raydistill-test-cache-"))  # latency memo
# what datasets.load_dataset makes of a local folder (issue 38's --dataset DIR): a cache of the tests' own
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="raydistill-test-datasets-"))

# The interrupt tests send Ctrl-C to the commands they start (and to this process): a suite launched as a background
# job inherits SIGINT ignored, which the commands rightly keep ignoring (cli.py), so take Ctrl-C back here, as an
# interactive pytest has it
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

POS = "good great fun love best nice happy".split()
NEG = "bad boring hate worst terrible sad awful".split()
FILL = "the movie film story plot acting was is a very really".split()


def sentence(rng: random.Random, label: int) -> str:
    words = [rng.choice(FILL) for _ in range(rng.randint(3, 8))]
    words.insert(rng.randint(0, len(words)), rng.choice(POS if label else NEG))
    return " ".join(words)


@pytest.fixture(scope="session")
def shared_data():
    path = os.environ.get("RAYDISTILL_SHARED_DATA")
    if not path or not os.path.isdir(path):
        pytest.skip("set RAYDISTILL_SHARED_DATA to the shared data folder (.ci/run does)")
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def glue_dir(tmp_path_factory):
    """A small learnable SST-2 / MRPC / STS-B folder in the GLUE layout (label follows a sentiment word)."""
    root = tmp_path_factory.mktemp("glue")
    rng = random.Random(0)
    for split, n in (("train", 192), ("dev", 48)):
        (root / "SST-2").mkdir(exist_ok=True)
        rows = ["sentence\tlabel"]
        for _ in range(n):
            y = rng.randint(0, 1)
            rows.append(f"{sentence(rng, y)} \t{y}")
        (root / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
        (root / "MRPC").mkdir(exist_ok=True)
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            y = rng.randint(0, 1)
            a = sentence(rng, 1)
            rows.append(f"{y}\t{i}\t{i + 1}\t{a}\t{a if y else sentence(rng, 0)}")
        (root / "MRPC" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        (root / "STS-B").mkdir(exist_ok=True)
        rows = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"]
        for i in range(n):
            y = rng.randint(0, 1)
            a, b = sentence(rng, y), sentence(rng, rng.randint(0, 1))
            rows.append(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{rng.uniform(0, 5):.3f}")
        (root / "STS-B" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return str(root)


def _texts():
    rng = random.Random(1)
    return [sentence(rng, i % 2) for i in range(50)] + [" ".join(POS + NEG + FILL)]


@pytest.fixture(scope="session")
def tiny_teacher(tmp_path_factory):
    """Factory: a tiny (4-layer, hidden 32, 2 heads) BERT teacher with a head for ``kind``."""
    from raydistill.testing import TinyShape, make_tiny_model

    made = {}

    def make(kind="classification", num_labels=2, family="bert", texts=None, label_names=None, **kw):
        key = (kind, num_labels, family, tuple(label_names or ()), tuple(sorted(kw.items())))
        if key not in made:
            d = tmp_path_factory.mktemp(f"teacher-{kind}-{family}")
            # the architecture's keywords (layers=, dropout=, …) make its shape; the rest (seed=, …) go as given
            shape = TinyShape(family=family, **{k: kw.pop(k) for k in list(kw) if k in TinyShape.__dataclass_fields__})
            texts = (texts or []) + _texts()
            made[key] = make_tiny_model(d, kind, num_labels, shape, texts, label_names=label_names, **kw)
        return made[key]

    return make


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole test session (each start costs seconds)."""
    ray = pytest.importorskip("ray")
    from raydistill.orchestrate.connect import init_ray

    if not ray.is_initialized():  # the product's own start: its actors talk to this Ray even beside another one
        init_ray(num_cpus=4, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def mlflow_schema_once(tmp_path_factory):
    """An empty MLflow SQLite store made once per session and copied into every new store this process opens
    (sqlite3's backup into the store's own connection), instead of MLflow building each from scratch: its ~60 Alembic
    migrations cost seconds per store (14 s under load here, against 0.2 s for the copy), and most tests open a store
    of their own. The copy is the schema MLflow itself made, at the same version. Commands the tests start in a
    subprocess still make theirs from scratch (the real path stays tested)."""
    import sqlite3
    import threading

    import sqlalchemy
    from mlflow.store.db import utils
    from mlflow.store.model_registry import sqlalchemy_store as registry

    real, lock = utils._initialize_tables, threading.Lock()
    template = tmp_path_factory.mktemp("mlflow-schema") / "empty.db"

    def initialize(engine):
        if engine.url.get_backend_name() != "sqlite" or engine.url.database in (None, "", ":memory:"):
            return real(engine)
        with lock:
            if not template.exists():
                made = sqlalchemy.create_engine(f"sqlite:///{template}")
                real(made)
                made.dispose()
        src, dst = sqlite3.connect(template), engine.raw_connection()
        try:
            src.backup(dst.driver_connection)
        finally:
            dst.close()
            src.close()

    utils._initialize_tables = registry._initialize_tables = initialize
    yield
    utils._initialize_tables = registry._initialize_tables = real


@pytest.fixture
def mlflow_uri(tmp_path):
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="session")
def korean_dir(tmp_path_factory):
    """Synthetic NSMC, KorQuAD (train+dev) and KLUE-NER folders in their published layouts."""
    import json

    root = tmp_path_factory.mktemp("korean")
    rng = random.Random(2)
    (root / "nsmc").mkdir()
    for split, n in (("train", 96), ("test", 32)):
        rows = ["id\tdocument\tlabel"] + [
            f"{i}\t{sentence(rng, y)}\t{y}" for i, y in enumerate(rng.randint(0, 1) for _ in range(n))
        ]
        (root / "nsmc" / f"ratings_{split}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "korquad").mkdir()
    for split, n in (("train", 48), ("dev", 16)):
        data = []
        for i in range(n):
            word = rng.choice(POS + NEG)
            ctx = f"{sentence(rng, 0)} . the answer is {word} . {sentence(rng, 1)}"
            data.append(
                {
                    "title": f"t{i}",
                    "paragraphs": [
                        {
                            "context": ctx,
                            "qas": [
                                {
                                    "id": f"{split}{i}",
                                    "question": "what is the answer ?",
                                    "answers": [{"text": word, "answer_start": ctx.index(f"is {word}") + 3}],
                                }
                            ],
                        }
                    ],
                }
            )
        (root / "korquad" / f"KorQuAD_v1.0_{split}.json").write_text(json.dumps({"version": "1", "data": data}))
    ner = root / "ner" / "klue_ner_v1.1"
    ner.mkdir(parents=True)
    for split, n in (("train", 64), ("dev", 16)):
        lines = ["## header"] * 5
        for i in range(n):
            name = rng.choice(["kim", "lee", "park"])
            words = [rng.choice(FILL) for _ in range(3)]
            pos = rng.randint(0, 3)
            lines.append(f"## klue-ner-v1_{split}_{i:05d}\tsynthetic")
            for j, w in enumerate(words[:pos] + [name] + words[pos:]):
                tags = ["B-PS"] + ["I-PS"] * (len(w) - 1) if w == name and j == pos else ["O"] * len(w)
                lines += [f"{c}\t{t}" for c, t in zip(w, tags, strict=True)] + [" \tO"]
            lines.append("")
        (ner / f"klue-ner-v1.1_{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root)
