"""wire/replay.py, rule replay's one definition: hand-worked cases, and the same answers
on a text's characters (the contract) as on its UTF-8 bytes (the repairers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamfix.wire.contract import repeat
from streamfix.wire.replay import DIVERGED, HOLD, PHRASE, REPEATED, START, TEXT, WHOLE, step

TEXT16 = "The quick brown fox."  # 20 characters, two deltas


@pytest.mark.parametrize(
    ("held", "deltas", "delta", "want"),
    [
        (-1, 2, TEXT16, WHOLE),  # the whole text once more
        (-1, 1, TEXT16, TEXT),  # one delta is no text to repeat yet
        (-1, 2, "The quick", START),  # the text's beginning: a run may start
        (-1, 2, "quick", TEXT),  # not its beginning
        (9, 2, " brown", HOLD),  # the run goes on
        (9, 2, " brown fox.", REPEATED),  # ... and completes the text
        (9, 2, " green", DIVERGED),  # ... or leaves it
    ],
)
def test_cases(held: int, deltas: int, delta: str, want: int) -> None:
    assert step(TEXT16, len(TEXT16), held, deltas, len(TEXT16), delta) == want


def test_a_phrase_said_over_and_over_is_text() -> None:
    text = "ha " * 6  # 18 characters
    assert step(text, len(text), -1, 2, len(text), "ha ") == START
    assert step(text, len(text), len(text) - 3, 2, len(text), "ha ") == PHRASE


def test_short_texts_start_no_run() -> None:
    assert step("abcdef", 6, -1, 3, 6, "abc") == TEXT  # under MIN_REPEAT characters


PIECES = st.sampled_from(["ab", "é", "ab é", "x", "日本", " ", "abab", "The quick brown "])


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=8), st.one_of(st.none(), st.integers(0, 8)), PIECES)
def test_characters_and_utf8_bytes_agree(parts: list[str], held: int | None, delta: str) -> None:
    """The contract asks on a text's characters, the repairers on its UTF-8 bytes: the same
    answer for the same text, held run (its first ``held`` deltas again) and delta; and the
    contract's :func:`repeat` reports what :func:`step` says."""
    base = "".join(parts)
    run = None if held is None else "".join(parts[: min(held, len(parts))])
    chars = step(base, len(base), -1 if run is None else len(run), len(parts), len(base), delta)
    enc = base.encode()
    utf8 = step(enc, len(enc), -1 if run is None else len(run.encode()), len(parts), len(base), delta.encode())
    assert chars == utf8
    streamed = base + (run or "")  # the contract's form: the text as streamed, where the run began
    new_run, done = repeat(streamed, None if run is None else len(base), len(parts), delta)
    if chars in (WHOLE, REPEATED):
        assert done == len(base) and new_run is None
    elif chars in (START, HOLD):
        assert new_run is not None and done == 0
    elif chars in (TEXT, PHRASE):
        assert done == 0 and new_run is None
