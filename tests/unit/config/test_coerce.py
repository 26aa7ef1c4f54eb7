"""config/coerce: a space's data section names its labels as YAML gives them — a list whose numbers are names too, or
one comma-separated string — each once; anything else a one-line error naming the field."""

from __future__ import annotations

import pytest

from raydistill.common.errors import UserError
from raydistill.config.coerce import build
from raydistill.tasks.filedata import FileData


@pytest.mark.parametrize(
    "given, names",
    [
        ([0, 1], ("0", "1")),  # YAML's numbers: a file labelled 0 and 1 (they crashed the sweep with a traceback)
        ("negative, positive", ("negative", "positive")),  # one string: split on commas, not into characters
        (["neg", "pos"], ("neg", "pos")),
    ],
)
def test_labels_are_names_in_order(given, names):
    assert build(FileData, {"labels": given}, "data.").labels == names


@pytest.mark.parametrize(
    "given, says",
    [
        (["negative", "negative", "positive"], "names negative more than once"),  # index 0 no row would have
        ([[1]], "expected a list of names"),
        ({"a": 1}, "expected a list of names"),
        ([None, "x"], "expected a list of names"),
    ],
)
def test_bad_labels_are_one_line_naming_the_field(given, says):
    with pytest.raises(UserError) as e:
        build(FileData, {"labels": given}, "data.")
    assert e.value.field == "data.labels" and says in e.value.message and "\n" not in str(e.value)
