"""Values crossing between the trusted side and a sandboxed program: plain built-in types only.

Arguments go to the program marshalled (marshal keeps exact built-in types and refuses
subclasses). Results come back as tagged JSON written by the harness, and the trusted side
parses them with `json` (never `marshal` or `pickle`: the bytes come from untrusted code) and
rebuilds *fresh* objects of exact built-in types. So the hidden tests' assertions only ever
compare values the program never touched: no `__eq__` override, no float subclass, no object
at all of the program's making reaches them.

Wire form (one JSON value per result): null, true, false, or a list whose first item is a tag:
    ["i", hex]  int        ["f", float.hex]  float      ["c", hex, hex]  complex
    ["s", hex]  str (UTF-8 bytes, surrogates kept)      ["b", hex]  bytes
    ["l", [..]] list   ["t", [..]] tuple   ["S", [..]] set   ["F", [..]] frozenset
    ["d", [k1, v1, k2, v2, ...]] dict
    ["o", hex, truth]  anything else: only its type name and bool() (or null) cross over
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

MAX_REPLY_BYTES = 16 << 20  # a result larger than this fails the call
# What one reply may decode to, checked on its bytes before json.loads builds anything. Bytes alone
# did not bound memory: 16 MiB of `["F",[]],` is 1.9 million frozensets, and one call took the
# framework from 62 MB to 834 MB and held the GIL for 2 s. Every JSON value but the first follows
# a `[` or a `,` (in an honest reply strings are hex, so neither occurs inside one), so counting
# those bounds the values before any is made. 400,000 values is about 130,000 numbers in a list;
# a rejected reply fails the call. Strings, bytes and ints cross as hex: at most MAX_REPLY_BYTES/2
# decoded. The framework's memory per call stays under REPLY_MEMORY_MB (docs/programming.md).
MAX_REPLY_VALUES = 400_000
MAX_REPLY_DEPTH = 100  # nested containers; rebuild() refuses deeper replies
REPLY_MEMORY_MB = 100  # documented bound on the growth per call; the worst replies within the bounds measured 48-66 MB
# Distinct items of one container that may share a hash() value. Building a set or dict of n
# colliding items takes n**2 / 2 comparisons in one C call that holds the GIL (60,000 ints made to
# collide: 39 s with every episode, the event loop and Ctrl-C frozen); the hidden tests' own
# `set(f())` is the same call. Honest values never come near: str and bytes hashes are salted
# per process, and only crafted ints, floats, complexes and tuples collide at all.
MAX_SHARED_HASH = 32

PLAIN_ATOMS = (type(None), bool, int, float, complex, str, bytes)
PLAIN_CONTAINERS = (list, tuple, set, frozenset, dict)


class NotPlain(ValueError):
    """A value that cannot cross: not made of exact built-in types (or malformed on the wire)."""


class ReplyTooLarge(NotPlain):
    """A reply past the bounds on what it may decode to: hostile, not a value."""


class CandidateFailure(BaseException):
    """Raised into the hidden tests when a call to the program failed (it raised, died, hung,
    or returned something that is not a plain value). A BaseException so that a test's own
    `except Exception` does not swallow it; the session records the failure anyway."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


class Opaque:
    """A result that was not a plain value (a `re.Match`, a generator, a float subclass...).

    Only its truth value crossed, as the program's own `bool()` computed it: that is no more
    than returning True or False, so `assert f(x)` / `assert not f(x)` keep working. Any other
    use (comparison, hashing, arithmetic, iteration) fails the test: stricter, never weaker.
    """

    __slots__ = ("type_name", "truth", "_on_misuse")

    def __init__(self, type_name: str, truth: bool | None, on_misuse):
        self.type_name, self.truth, self._on_misuse = type_name, truth, on_misuse

    def _refuse(self, *_: Any) -> Any:
        raise self._on_misuse("failed", f"the program returned a {self.type_name} object, not a plain value")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _refuse
    __float__ = __int__ = __index__ = __len__ = __iter__ = __contains__ = _refuse

    def __bool__(self) -> bool:
        if self.truth is None:
            self._refuse()
        return bool(self.truth)

    def __repr__(self) -> str:
        return f"<{self.type_name} object from the program>"


def check_plain(value: Any, depth: int = 0) -> None:
    """Raise NotPlain unless `value` is built only of exact plain types (arguments to send)."""
    if depth > 200:
        raise NotPlain("nested too deeply")
    kind = type(value)
    if kind in PLAIN_ATOMS:
        return
    if kind is dict:
        for key, item in value.items():
            check_plain(key, depth + 1)
            check_plain(item, depth + 1)
        return
    if kind in PLAIN_CONTAINERS:
        for item in value:
            check_plain(item, depth + 1)
        return
    raise NotPlain(f"a {kind.__name__} is not a plain value")


def _text(node: Any) -> str:
    if type(node) is not str:
        raise NotPlain("malformed reply")
    return node


def _hex_bytes(node: Any) -> bytes:
    try:
        return bytes.fromhex(_text(node))
    except ValueError:
        raise NotPlain("malformed reply") from None


def _float(node: Any) -> float:
    try:
        return float.fromhex(_text(node))
    except (ValueError, OverflowError):
        raise NotPlain("malformed reply") from None


def _items(node: list, size: int) -> list:
    if len(node) != size:
        raise NotPlain("malformed reply")
    return node


def rebuild(node: Any, on_misuse, depth: int = 0) -> Any:
    """A fresh plain value from a parsed JSON reply, checking every node's exact type."""
    if node is None or type(node) is bool:
        return node
    if depth > MAX_REPLY_DEPTH:
        raise NotPlain(f"a reply nested over {MAX_REPLY_DEPTH} containers deep")
    if type(node) is not list or not node or type(node[0]) is not str:
        raise NotPlain("malformed reply")
    tag = node[0]
    if tag == "i":
        try:
            return int(_text(_items(node, 2)[1]), 16)
        except ValueError:
            raise NotPlain("malformed reply") from None
    if tag == "f":
        return _float(_items(node, 2)[1])
    if tag == "c":
        _, real, imag = _items(node, 3)
        return complex(_float(real), _float(imag))
    if tag == "s":
        try:
            return _hex_bytes(_items(node, 2)[1]).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise NotPlain("malformed reply") from None
    if tag == "b":
        return _hex_bytes(_items(node, 2)[1])
    if tag == "o":
        _, name, truth = _items(node, 3)
        if truth is not None and type(truth) is not bool:
            raise NotPlain("malformed reply")
        return Opaque(_hex_bytes(name).decode("utf-8", "replace")[:100], truth, on_misuse)
    body = _items(node, 2)[1]
    if type(body) is not list:
        raise NotPlain("malformed reply")
    items = [rebuild(item, on_misuse, depth + 1) for item in body]
    # A tuple's tuples are checked by the nearest list or set around it (hashing them at every
    # tuple level would cost depth x size), and in the result itself: a test's `set(f())`.
    _refuse_collisions(items[::2] if tag == "d" else items, tuples=tag != "t" or depth == 0)
    try:
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        if tag == "S":
            return set(items)
        if tag == "F":
            return frozenset(items)
        if tag == "d" and len(items) % 2 == 0:
            return dict(zip(items[::2], items[1::2]))
    except (CandidateFailure, TypeError):  # a list or an Opaque as a set member or dict key
        raise NotPlain("an unhashable object as a set member or dict key") from None
    raise NotPlain("malformed reply")


def _refuse_collisions(items: list, *, tuples: bool) -> None:
    """NotPlain when more than MAX_SHARED_HASH distinct items share one hash (see above). Linear:
    hashes are counted first, and only an oversized group is told apart, against at most
    MAX_SHARED_HASH values kept aside (equal values, a list of one repeated number, share a hash
    honestly)."""
    if len(items) <= MAX_SHARED_HASH:
        return
    hashes = [_hash_of(item, tuples) for item in items]
    counts = Counter(hashes)
    counts.pop(None, None)
    crowded: dict[int, list] = {h: [] for h, n in counts.items() if n > MAX_SHARED_HASH}
    if not crowded:
        return
    for item, h in zip(items, hashes):
        seen = crowded.get(h) if h is not None else None
        if seen is None or item in seen:  # == against at most MAX_SHARED_HASH kept values
            continue
        seen.append(item)
        if len(seen) > MAX_SHARED_HASH:
            raise NotPlain(f"over {MAX_SHARED_HASH} distinct values sharing one hash (a hash-collision attack)")


_MODULUS = (1 << 61) - 1  # hash(n) == n for ints below it (but -1): distinct ones never collide


def _hash_of(item: Any, tuples: bool) -> int | None:
    """The hash that counts towards a collision group, or None (not hashed: a small int, whose
    hash no other int shares; a str, salted; a tuple left to the nearest list or set)."""
    kind = type(item)
    if kind is int:
        return None if -_MODULUS < item < _MODULUS else hash(item)
    if kind is float or kind is complex or kind is frozenset or (kind is tuple and tuples and _hashable(item)):
        return hash(item)
    return None


def _hashable(value: tuple) -> bool:
    """hash() would neither fail nor reach an Opaque (whose hash fails the test it is used in)."""
    for item in value:
        kind = type(item)
        if kind is tuple:
            if not _hashable(item):
                return False
        elif kind is Opaque or kind is list or kind is dict or kind is set:
            return False
    return True


def parse_reply(data: bytes) -> Any:
    """The JSON of one reply frame; NotPlain if it is not even JSON, or would decode to more than
    MAX_REPLY_VALUES values (counted on the bytes, before anything is built)."""
    if data.count(b"[") + data.count(b",") >= MAX_REPLY_VALUES:
        raise ReplyTooLarge(f"a reply of over {MAX_REPLY_VALUES:,} values")
    try:
        return json.loads(data.decode("ascii"))
    except (ValueError, RecursionError):
        raise NotPlain("malformed reply") from None
