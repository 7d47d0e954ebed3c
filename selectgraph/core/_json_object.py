"""JSONObject: a dict built of JSON data only, so that a store need not check it again."""

from __future__ import annotations

from typing import Any

__all__ = ["JSONObject"]


class JSONObject(dict[str, Any]):
    """A dict whose maker guarantees it holds JSON data only.

    Its keys are strings; its values are strings, ints, finite floats, booleans,
    None, lists and dicts of the same (a subclass of str, int or float, an enum
    member say, is written as its plain value). A store encodes one without walking it
    first to look for a tuple or an int key that JSON would silently change
    (``persistence/_codec.encode_events``). Only code that builds every value
    itself makes one: the run's event log entries (``observe/_log_json``).
    """

    __slots__ = ()
