"""Stored score terms cut from a batch's flat list on demand read as the lists they stand for."""

from __future__ import annotations

from app.experiments.rows import StoredTerms


def test_stored_terms_read_as_one_list_per_candidate() -> None:
    flat = [9.0, 9.0, 0.1, 0.2, 0.3, 0.4, 0.5]  # another row's terms first: this row starts at 2
    terms = StoredTerms(flat, 2, [(0, 2), (2, 2), (2, 5)])
    assert len(terms) == 3
    assert list(terms) == [[0.1, 0.2], [], [0.3, 0.4, 0.5]]
    assert terms[0] == [0.1, 0.2] and terms[-1] == [0.3, 0.4, 0.5] and terms[1:] == [[], [0.3, 0.4, 0.5]]
    assert not terms[1] and [len(t) for t in terms] == [2, 0, 3]
