"""Shared leading token ids: of two sequences, and of many rows."""

from __future__ import annotations

from agentlightning.utils.token_prefix import common_prefix_length, shared_prefix_length


def test_two_sequences_share_their_leading_equal_ids() -> None:
    assert common_prefix_length([1, 2, 3, 4], [1, 2, 9, 4]) == 2


def test_a_sequence_that_starts_another_shares_all_of_itself() -> None:
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2


def test_sequences_that_differ_at_once_share_nothing() -> None:
    assert common_prefix_length([5, 1], [6, 1]) == 0
    assert common_prefix_length([], [1]) == 0


def test_a_list_and_a_tuple_of_the_same_ids_compare_alike() -> None:
    assert common_prefix_length((1, 2, 3), [1, 2, 3]) == 3


def test_the_limit_caps_the_shared_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 3], limit=2) == 2
    assert common_prefix_length([1, 2, 3], [1, 2, 3], limit=-1) == 0


def test_every_position_of_a_long_sequence_is_found() -> None:
    base = list(range(1000))
    for cut in (0, 1, 499, 500, 998, 999):
        other = [*base[:cut], -1, *base[cut + 1 :]]
        assert common_prefix_length(base, other) == cut


def test_many_rows_share_what_all_of_them_start_with() -> None:
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 7]]) == 2


def test_one_row_shares_itself_up_to_the_limit() -> None:
    assert shared_prefix_length([[1, 2, 3]], limit=2) == 2
    assert shared_prefix_length([[1, 2, 3]]) == 3


def test_no_rows_share_nothing() -> None:
    assert shared_prefix_length([]) == 0
