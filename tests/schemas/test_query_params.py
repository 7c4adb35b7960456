"""``one_value_each``: a query string's pairs, one value a parameter; a list's repeats joined, any other's refused."""

from __future__ import annotations

import pytest

from schemas.query_params import GivenTwice, one_value_each


def test_one_value_each_in_order() -> None:
    assert one_value_each([("a", "1"), ("b", "2")]) == {"a": "1", "b": "2"}


def test_a_list_joins_its_repeats_in_the_order_given() -> None:
    pairs = [("unset", "model"), ("limit", "5"), ("unset", "rule,instance")]
    assert one_value_each(pairs, lists={"unset"}) == {"unset": "model,rule,instance", "limit": "5"}


@pytest.mark.parametrize("pairs", [[("a", "1"), ("a", "2")], [("a", "1"), ("a", "1")],
                                   [("a", ""), ("b", ""), ("a", "")]])
def test_any_other_parameter_given_twice_is_refused_by_name(pairs: list[tuple[str, str]]) -> None:
    with pytest.raises(GivenTwice, match=r"^parameter `a` is given twice$") as caught:
        one_value_each(pairs, lists={"unset"})
    assert caught.value.param == "a" and isinstance(caught.value, ValueError)


def test_only_the_names_read_are_checked() -> None:
    assert one_value_each([("x", "1"), ("x", "2"), ("a", "3")], names={"a"}) == {"a": "3"}
