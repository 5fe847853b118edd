"""wire/fastread.py: one delta event's string, and its C twin held to the definition.

The definition (:func:`fastread.read`) against an oracle that parses the whole event with
orjson (the full path's parse): the same string, or None (the caller's way reads it);
every encoder's delta is read. The C twin (``_fastread``, the compiled core only)
against the definition: it answers the same bytes or leaves the read to it (False),
never another answer, and it decides the usual deltas itself.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from streamfix.wire import fastread
from support import compiled_core

FIRST = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":'
MIDS = (b',"output_index":', b',"delta":"')
LAST = b'","logprobs":[]}\n\n'
BUDGET = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def _c():
    """The C twin's function, or None (the pure build)."""
    if not fastread.native():
        return None
    from streamfix.wire import _fastread  # type: ignore[attr-defined]

    return _fastread.event_string


def oracle(chunk: bytes) -> bytes | None:
    """What the full path reads of ``chunk`` as this layout's event: its JSON parsed by
    orjson, the integers canonical (the layout's holes), the keys those of the layout, and
    the text's UTF-8; None for anything else."""
    if not (chunk.startswith(FIRST[: FIRST.index(b"{")]) and chunk.endswith(b"\n\n")):
        return None
    body = chunk[chunk.index(b"data: ") + 6 : -2]
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or list(obj) != ["type", "sequence_number", "output_index", "delta", "logprobs"]:
        return None
    if orjson.dumps(obj["sequence_number"]) + MIDS[0] + orjson.dumps(obj["output_index"]) + MIDS[1] not in body:
        return None  # (not the canonical digits, or not this layout's bytes)
    if not isinstance(obj["sequence_number"], int) or not isinstance(obj["output_index"], int):
        return None
    if (
        min(obj["sequence_number"], obj["output_index"]) < 0
        or max(obj["sequence_number"], obj["output_index"]) >= 10**18
    ):
        return None
    if obj["type"] != "response.output_text.delta" or obj["logprobs"] != [] or not isinstance(obj["delta"], str):
        return None
    if not body.startswith(FIRST[FIRST.index(b"{") :]) or not body.endswith(LAST[:-2]):
        return None
    return obj["delta"].encode()


TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
BITS = st.sampled_from(
    [b"a", b" ", b"\\n", b'\\"', b"\\\\", b"\\/", b"\\t", b"\\r", b"\\b", b"\\f", b"\\u003c", b"\\u00e9", b"\\u20ac",
     b"\\ud83d\\ude00", b"\\uD83D\\uDE00", b"\\ud83d", b"\\ude00", b"\\ud83dx", b"\\u12", b"\\x41", b"\\", b'"',
     b"\n", b"\x00", b"\x1f", b"\x7f", "\u00e9".encode(), "\u20ac".encode(), b"\xc3", b"\xff", b"\xed\xa0\x80",
     b"\\u0000", b"\\uzzzz", b"\\U003c", b"}", b"\r"]
)  # fmt: skip
"""Pieces of a string's raw bytes: JSON's escapes, bad escapes, raw quotes and control
bytes, valid and invalid UTF-8."""
DIGITS = st.one_of(st.integers(min_value=0, max_value=10**18 + 5).map(lambda v: str(v).encode()),
                   st.sampled_from([b"", b"00", b"01", b"-1", b"1.5", b"1e3", b"9" * 19, b"a"]))  # fmt: skip


def _encoded(text: str, how: int) -> bytes:
    """``text`` as a JSON string's raw bytes, as different encoders write it."""
    if how == 0:
        return orjson.dumps(text)[1:-1]
    if how == 1:
        return json.dumps(text, ensure_ascii=True).encode()[1:-1]  # every non-ASCII as \\uXXXX
    return json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")[1:-1]


def _check(chunk: bytes) -> None:
    want = oracle(chunk)
    got = fastread.read(chunk, FIRST, MIDS, LAST)
    # bytes only where the full path reads those bytes; None may also be a read the
    # full path takes otherwise (duplicate keys: the caller's whole way reads those)
    assert got is None or got == want, (chunk, got, want)
    c = _c()
    if c is not None:
        fast = c(chunk, FIRST, MIDS, LAST)
        assert fast is False or (type(fast) is bytes and fast == got), (chunk, fast, got)
        assert fastread.event_string(chunk, FIRST, MIDS, LAST) == got


@BUDGET
@given(seq=DIGITS, idx=DIGITS, bits=st.lists(BITS, max_size=10))
@example(seq=b"7", idx=b"0", bits=[b'\\"', b"a"])
@example(seq=b"7", idx=b"0", bits=[b"\\\\", b'"'])  # an escaped backslash, then a raw quote
@example(seq=b"7", idx=b"0", bits=[b"\\ud83d", b"\\ude00"])
def test_read_is_the_full_paths_reading_and_the_c_twin_agrees(seq: bytes, idx: bytes, bits: list[bytes]) -> None:
    _check(FIRST + seq + MIDS[0] + idx + MIDS[1] + b"".join(bits) + LAST)


@BUDGET
@given(seq=st.integers(min_value=0, max_value=10**18 - 1), text=TEXT, how=st.integers(0, 2), cut=st.integers(0, 400))
def test_an_encoders_delta_is_read_and_the_c_twin_decides_it(seq: int, text: str, how: int, cut: int) -> None:
    raw = _encoded(text, how)
    chunk = FIRST + str(seq).encode() + MIDS[0] + b"3" + MIDS[1] + raw + LAST
    _check(chunk)
    assert fastread.read(chunk, FIRST, MIDS, LAST) == text.encode()
    c = _c()
    if c is not None:
        assert c(chunk, FIRST, MIDS, LAST) == text.encode()  # the usual delta: decided in C
    _check(chunk[: len(chunk) - cut % (len(chunk) + 1)])  # a cut read: not the event
    _check(chunk + b"data: x\n\n")  # more than the one event


def test_the_c_twin_is_loaded_with_the_compiled_core() -> None:
    if not compiled_core():
        pytest.skip("the pure build: no C twin")
    assert fastread.native()


@pytest.mark.parametrize("args", [(b"x", b"x", [b"a"], b"x"), ("x", b"x", (), b"x"), (b"x", b"x", (1,), b"x")])
def test_the_c_twin_leaves_what_it_was_not_made_for_to_the_definition(args: tuple) -> None:
    c = _c()
    if c is None:
        pytest.skip("the pure build: no C twin")
    assert c(*args) is False
    assert c(b"x") is False
