"""A text task's examples held by column (``tasks/examples.Examples``, issue 48): read as the list of dicts they were,
and the run's splits of a user's file made as views of them, not one dict per row."""

from __future__ import annotations

import json
import pickle
import tracemalloc

import pytest

from raydistill.tasks.examples import Examples, take


@pytest.fixture(autouse=True)
def _unsaid():
    from raydistill.tasks import files

    yield
    files._pending.clear()


def _dicts(texts, pairs, labels) -> list[dict]:
    return [{"text": t, "text_pair": p, "label": lab} for t, p, lab in zip(texts, pairs, labels, strict=True)]


def test_examples_read_as_the_list_of_dicts_they_were():
    texts, pairs, labels = [f"t{i}" for i in range(10)], [f"p{i}" for i in range(10)], [i % 3 for i in range(10)]
    for ps in (pairs, None):
        ex = Examples(texts, ps, labels)
        want = _dicts(texts, ps or [None] * 10, labels)
        assert ex == want and want == ex and list(ex) == want and len(ex) == 10 and ex != want[:-1]
        assert list(ex[0]) == ["text", "text_pair", "label"]  # the keys in the order the loader wrote them
        assert ex[-1] == want[-1] and ex[2:7:2] == want[2:7:2] and isinstance(ex[1:3], list)
        with pytest.raises(IndexError):
            ex[10]
        sub = ex.take([7, 2, 5])
        assert isinstance(sub, Examples) and sub == [want[7], want[2], want[5]]
        assert sub.take([2, 0]) == [want[5], want[7]] and sub[-1] == want[5]
        with pytest.raises(IndexError):
            sub.take([3])
        back = pickle.loads(pickle.dumps(sub))
        assert back == sub and len(back.texts) == 3 and back.at is None  # only the rows it holds travel
        assert take(want, [7, 2, 5]) == sub and isinstance(take(want, [1]), list)  # a list stays a list


def _file(tmp_path, n: int, pair: bool) -> str:
    path = tmp_path / ("p.jsonl" if pair else "t.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            rec = {"sentence": f"row {i} " + "w" * (i % 31), "label": ("neg", "pos")[i % 2]}
            f.write(json.dumps({**rec, **({"sentence2": f"other {i % 50}"} if pair else {})}) + "\n")
    return str(path)


@pytest.mark.parametrize("pair", [False, True])
def test_a_files_splits_are_its_rows_without_a_dict_per_row(tmp_path, pair):
    """``train_val_dev`` on a user's file: train, validation and dev (held out of train) are together every row of
    the file, each the dict it was (text, pair, label index); and they hold under 40 B a row, where a dict per row
    held ~190 B (74 MB of a 400k-row file)."""
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.data.splits import train_val_dev

    n = 20_000
    data = {"train_file": _file(tmp_path, n, pair), **({"text_pair_column": "sentence2"} if pair else {})}
    cfg = RunConfig.from_dict({"teacher": "-", "data": data, "train": {"val_fraction": 0.1}})
    task = task_of(cfg)
    train_val_dev(cfg, task)  # the file read and the carves computed: both kept for the process
    tracemalloc.start()
    try:
        train, val, dev = train_val_dev(cfg, task)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 40 * n, f"{held / n:.0f} B a row"
    assert all(isinstance(s, Examples) for s in (train, val, dev))
    got = sorted([*train, *val, *dev], key=lambda r: int(r["text"].split()[1]))
    want = [
        {"text": f"row {i} " + "w" * (i % 31), "text_pair": f"other {i % 50}" if pair else None, "label": i % 2}
        for i in range(n)
    ]
    assert got == want and len(dev) == n // 10 and len(val) > 0
