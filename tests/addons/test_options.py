"""addons/options.py: the words a boolean option takes."""

from __future__ import annotations

import pytest
from streamfix.addons import options


def test_bool_words() -> None:
    for word, value in [
        ("true", True),
        ("on", True),
        ("yes", True),
        ("1", True),
        ("false", False),
        ("off", False),
        ("no", False),
        ("0", False),
        ("Off", False),
        ("YES", True),
    ]:
        assert options.parse_value("streamfix_status", bool, None, [word]) is value, word
    assert options.parse_value("streamfix_status", bool, None, []) is True
    assert options.parse_value("streamfix_status", bool, None, ["toggle"], current=True) is False
    with pytest.raises(Exception, match="give it once"):
        options.parse_value("streamfix_status", bool, None, ["on", "off"])
