"""Fingerprints: hash state contents so loop and stall detection cost O(update), not O(state).

Every value gets a structural fingerprint consistent with ``==``. Lists use a
polynomial rolling hash, dicts and sets an order-free sum, so appending to a
list or merging keys into a dict updates a fingerprint from the update alone.

:class:`StateFingerprint` tracks the whole of ``data`` without ever hashing it:
a key nobody has written yet stands for its initial value through a random
per-run token, and the total moves only when a key changes. The price of never
hashing the initial state is a rare false negative: a value rebuilt by a
different route (an assignment recreating what appends produced) looks new,
so such a loop is caught one cycle later. There are no false positives beyond
61-bit hash collisions.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Container, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Final

from pydantic import BaseModel

__all__ = [
    "MOD",
    "StateFingerprint",
    "key_weight",
    "dict_merge_fingerprint",
    "fingerprint",
    "list_drop_front_fingerprint",
    "list_extend_fingerprint",
    "list_replace_fingerprint",
]

MOD: Final = (1 << 61) - 1
"""A Mersenne prime; fingerprints live in ``[0, MOD)``."""
_BASE: Final = 1_000_003_000_000_007 % MOD
_LIST: Final = 0x1F1F_1F1F_1F1F_1F1F % MOD
_TUPLE: Final = 0x2E2E_2E2E_2E2E_2E2E % MOD
_DICT: Final = 0x3D3D_3D3D_3D3D_3D3D % MOD
_SET: Final = 0x4C4C_4C4C_4C4C_4C4C % MOD
_NONE: Final = 0x5B5B_5B5B_5B5B_5B5B % MOD
# Tokens for values never written only need to differ from real fingerprints,
# so one random nonce per process will do (drawing one per run costs a syscall).
_NONCE: Final = secrets.randbits(60)


_MASK64: Final = (1 << 64) - 1
_INT: Final = 0x6A09E667F3BCC908
_FLOAT: Final = 0xBB67AE8584CAA73B
_STR: Final = 0x3C6EF372FE94F82B
_BYTES: Final = 0xA54FF53A5F1D36F1
_PAIR: Final = 0x9E3779B97F4A7C15


def _scramble(x: int) -> int:
    """A 64-bit avalanche mix (splitmix64's finaliser), reduced into ``[0, MOD)``.

    Sums of scrambled values do not cancel the way sums of raw integers do
    (``{1, 4}`` vs ``{2, 3}``), so sets and dicts can be fingerprinted by summing.
    """
    x &= _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) % MOD


def _mix(a: int, b: int) -> int:
    """An order-sensitive combination of two fingerprints (a dict entry, a type and its body)."""
    return _scramble(a * _PAIR + b)


def _int_fingerprint(value: int) -> int:
    # Python's hash(-1) == hash(-2); the value itself, reduced, keeps them apart.
    # Scalars are only tagged, not scrambled: the sums that must not cancel
    # (sets, dict entries) scramble their terms themselves.
    return ((value % MOD) ^ _INT) % MOD


def fingerprint(value: Any) -> int:
    """A structural hash of ``value``: equal values get equal fingerprints."""
    kind = type(value)
    if kind is int or kind is bool:
        number: int = value
        return ((number % MOD) ^ _INT) % MOD  # _int_fingerprint, inlined: the commonest case
    if kind is str:
        return ((hash(value) % MOD) ^ _STR) % MOD
    if value is None:
        return _NONE
    if kind is float:
        # 1.0 == 1, so an integral float must fingerprint like the int.
        if value.is_integer():
            return _int_fingerprint(int(value))
        return ((hash(value) % MOD) ^ _FLOAT) % MOD
    if kind is list:
        return (_LIST + _rolling(0, value)) % MOD
    if kind is dict:
        return (_DICT + _dict_sum(value)) % MOD
    if kind is tuple:
        return (_TUPLE + _rolling(0, value)) % MOD
    if kind is set or kind is frozenset:
        return (_SET + _set_sum(value)) % MOD
    if kind is bytes:
        return ((hash(value) % MOD) ^ _BYTES) % MOD
    return _structured(value, kind)


def _structured(value: Any, kind: type) -> int:
    """Fingerprints of models, dataclasses, and subclasses of the built-in containers."""
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        fields.update(value.__pydantic_extra__ or {})
        return _mix(id(kind), _dict_sum(fields))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Only the fields == compares, so equal instances fingerprint alike.
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.compare}
        return _mix(id(kind), _dict_sum(fields))
    # Subclasses compare equal to their base (a namedtuple to a tuple, an
    # OrderedDict to a dict), so they fingerprint as their base does.
    if isinstance(value, tuple):
        return (_TUPLE + _rolling(0, value)) % MOD
    if isinstance(value, list):
        return (_LIST + _rolling(0, value)) % MOD
    if isinstance(value, Mapping):
        return (_DICT + _dict_sum(value)) % MOD
    if isinstance(value, set | frozenset):
        return (_SET + _set_sum(value)) % MOD
    if isinstance(value, int):
        return _int_fingerprint(int(value))
    if isinstance(value, str):
        return ((hash(str(value)) % MOD) ^ _STR) % MOD
    try:
        return _scramble(hash(value))
    except TypeError:
        # Unhashable object without structure we know: identity is all we can tell.
        return _mix(id(kind), id(value))


def _rolling(start: int, items: Iterable[Any]) -> int:
    rolled = start
    for item in items:
        rolled = (rolled * _BASE + fingerprint(item)) % MOD
    return rolled


def _dict_sum(mapping: Mapping[Any, Any]) -> int:
    return sum(_mix(fingerprint(k), fingerprint(v)) for k, v in mapping.items()) % MOD


def _set_sum(items: Iterable[Any]) -> int:
    return sum(_scramble(fingerprint(item)) for item in items) % MOD


def list_extend_fingerprint(old: int, items: Sequence[Any]) -> int:
    """Fingerprint of a list after ``extend(items)``, from its old fingerprint."""
    if len(items) == 1:  # one appended item: the common step, without the loop
        item = items[0]
        item_fp = ((item % MOD) ^ _INT) % MOD if type(item) is int else fingerprint(item)
        return ((old - _LIST) * _BASE + item_fp + _LIST) % MOD
    return (_LIST + _rolling((old - _LIST) % MOD, items)) % MOD


def list_drop_front_fingerprint(old: int, dropped: Sequence[Any], length: int) -> int:
    """Fingerprint after deleting ``dropped`` from the front of a list of ``length`` items."""
    rolled = (old - _LIST) % MOD
    for i, item in enumerate(dropped):
        rolled = (rolled - fingerprint(item) * pow(_BASE, length - 1 - i, MOD)) % MOD
    return (_LIST + rolled) % MOD


def list_replace_fingerprint(old: int, index: int, before: Any, after: Any, length: int) -> int:
    """Fingerprint after replacing the item at ``index`` in a list of ``length`` items."""
    delta = (fingerprint(after) - fingerprint(before)) * pow(_BASE, length - 1 - index, MOD)
    return (old + delta) % MOD


def dict_merge_fingerprint(old: int, current: Mapping[Any, Any], update: Mapping[Any, Any]) -> int:
    """Fingerprint of ``current`` after ``current.update(update)``."""
    total = old
    for key, value in update.items():
        key_fp = fingerprint(key)
        if key in current:
            total -= _mix(key_fp, fingerprint(current[key]))
        total += _mix(key_fp, fingerprint(value))
    return total % MOD


class StateFingerprint:
    """Running fingerprint of a state's ``data``; zero means "as the run started".

    The total is ``sum(weight(key) * (fp(key) - fp_at_start(key))) mod MOD``: a
    change to one key moves it by one multiplication, whatever else the state holds.
    """

    __slots__ = ("keys", "total")

    def __init__(self) -> None:
        self.total = 0
        """Fingerprint of the data relative to its initial contents."""
        self.keys: dict[str, int] = {}
        """Fingerprint of every key written so far."""

    def initial(self, key: str, present: bool) -> int:
        """The fingerprint of a key never written: a token for its initial value (or absence)."""
        return hash((_NONCE, key, present)) % MOD

    def of(self, key: str, present: bool) -> int:
        """The current fingerprint of ``key``; ``present`` says whether it is in the data."""
        known = self.keys.get(key)
        return known if known is not None else self.initial(key, present)

    def absent(self, key: str) -> int:
        """The fingerprint of ``key`` being missing from the data."""
        return self.initial(key, False)

    def set(self, key: str, old: int, new: int) -> None:
        """Record that ``key`` changed from fingerprint ``old`` to ``new``."""
        self.keys[key] = new
        if old != new:
            self.total = (self.total + key_weight(key) * (new - old)) % MOD

    def assign(
        self, data: MutableMapping[str, Any], update: Mapping[str, Any], skip: Container[str] = ()
    ) -> None:
        """Do ``data[key] = value`` for each entry of ``update`` not in ``skip``, keeping the total.

        The merge's per-step path: :meth:`of`, :meth:`set` and :func:`key_weight`
        are written out here, since a call per key would cost more than the work.
        """
        known = self.keys
        total = self.total
        for key, value in update.items():
            if key in skip:
                continue
            old = known.get(key)
            if old is None:
                old = self.initial(key, key in data)
            data[key] = value
            new = fingerprint(value)
            if new != old:
                known[key] = new
                total = (total + ((hash(key) % MOD) | 1) * (new - old)) % MOD
        self.total = total


def key_weight(key: str) -> int:
    """The multiplier of ``key`` in a StateFingerprint total (odd, so never zero)."""
    return (hash(key) % MOD) | 1
