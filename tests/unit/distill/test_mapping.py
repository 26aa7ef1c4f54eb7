import pytest

from raydistill.common.errors import UserError
from raydistill.distill.mapping import MAPPINGS, layer_pairs


def teachers(name, m, n):
    return [t for _, t in layer_pairs(name, m, n)]


def test_tinybert_uniform_12_to_4():
    pairs = layer_pairs("uniform", 4, 12)
    assert pairs == [(1, 3), (2, 6), (3, 9), (4, 12)]  # attention layers
    assert [t for _, t in [(0, 0)] + pairs] == [0, 3, 6, 9, 12]  # hidden states incl. embeddings


def test_uniform_floor_when_not_divisible():
    assert teachers("uniform", 5, 12) == [2, 4, 7, 9, 12]  # floor(12m/5)
    assert teachers("uniform", 6, 6) == [1, 2, 3, 4, 5, 6]


def test_pkd_skip_and_last():
    assert layer_pairs("skip", 6, 12) == [(1, 2), (2, 4), (3, 6), (4, 8), (5, 10)]
    assert teachers("skip", 3, 12) == [4, 8]
    assert layer_pairs("last", 6, 12) == [(1, 7), (2, 8), (3, 9), (4, 10), (5, 11)]
    assert teachers("last", 3, 12) == [10, 11]


def test_top_bottom_explicit():
    assert teachers("top", 3, 12) == [10, 11, 12]
    assert teachers("bottom", 3, 12) == [1, 2, 3]
    assert layer_pairs("3,6,9,12", 4, 12) == [(1, 3), (2, 6), (3, 9), (4, 12)]
    assert teachers([2, 4], 2, 4) == [2, 4]
    assert set(MAPPINGS) == {"uniform", "skip", "last", "top", "bottom"}


@pytest.mark.parametrize(
    "name,m,n",
    [
        ("uniform", 13, 12),  # M > N
        ("uniform", 0, 12),  # M = 0
        ("skip", 5, 12),  # 12 % 5 != 0
        ("3,6,9", 4, 12),  # wrong length
        ("3,3,9,12", 4, 12),  # not strictly increasing
        ("3,6,9,13", 4, 12),  # outside 1..N
        ("0,6,9,12", 4, 12),  # 0 is the embeddings, not a layer
        ("unifrom", 4, 12),  # typo
    ],
)
def test_impossible_mappings_are_user_errors(name, m, n):
    with pytest.raises(UserError) as e:
        layer_pairs(name, m, n)
    assert e.value.field == "distill.mapping"
