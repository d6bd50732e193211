import pytest

import calc


def test_total():
    assert calc.total([1, 2, 3]) == 6
    assert calc.total([]) == 0


def test_mean():
    assert calc.mean([1, 2, 3, 4]) == 2.5


def test_mean_single():
    assert calc.mean([7]) == 7


def test_median_odd():
    assert calc.median([3, 1, 2]) == 2


def test_median_even():
    assert calc.median([4, 1, 3, 2]) == 2.5


def test_median_empty():
    with pytest.raises(ValueError):
        calc.median([])


def test_cli(capsys):
    assert calc.main(["calc.py", "total", "1", "2"]) == 0
    assert capsys.readouterr().out.strip() == "3.0"
