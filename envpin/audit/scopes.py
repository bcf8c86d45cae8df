"""Persistent variable scopes for the Dockerfile parser: every instruction keeps the variables visible to it,
and a stage inherits its parent's ENV, without copying a whole scope at each ARG or ENV.

A Scope is an immutable hash trie (16 ways per level): `set` returns a new Scope that shares all but one
path of at most 16 small nodes with the old one. Keeping the scope of each of N instructions therefore costs
O(N log N) memory and time, where a dict copied at every ARG/ENV costs O(N^2) (20,000 ENV lines: gigabytes).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping

from envpin.audit.words import Var

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

_WIDTH, _BITS, _MASK, _HASH_BITS = 16, 4, 15, 64
_EMPTY: tuple[Any, ...] = (None,) * _WIDTH


class _Leaf:
    __slots__ = ("h", "key", "value")

    def __init__(self, key: str, value: Var, h: int) -> None:
        self.key, self.value, self.h = key, value, h


class _Bucket:
    """Keys whose 64-bit hashes are equal (past the trie's last level)."""

    __slots__ = ("leaves",)

    def __init__(self, leaves: tuple[_Leaf, ...]) -> None:
        self.leaves = leaves


def _merge(a: _Leaf, b: _Leaf, shift: int) -> Any:
    if shift >= _HASH_BITS:
        return _Bucket((a, b))
    ia, ib = (a.h >> shift) & _MASK, (b.h >> shift) & _MASK
    node = list(_EMPTY)
    if ia != ib:
        node[ia], node[ib] = a, b
    else:
        node[ia] = _merge(a, b, shift + _BITS)
    return tuple(node)


def _put(node: Any, shift: int, leaf: _Leaf) -> tuple[Any, int]:
    """(the node with `leaf` in it, 1 if its key is new else 0)."""
    if type(node) is _Bucket:
        kept = tuple(x for x in node.leaves if x.key != leaf.key)
        return _Bucket((*kept, leaf)), int(len(kept) == len(node.leaves))
    i = (leaf.h >> shift) & _MASK
    child = node[i]
    if child is None:
        new, added = leaf, 1
    elif type(child) is _Leaf:
        new, added = (leaf, 0) if child.key == leaf.key else (_merge(child, leaf, shift + _BITS), 1)
    else:
        new, added = _put(child, shift + _BITS, leaf)
    return (*node[:i], new, *node[i + 1 :]), added


class _ByGet(Mapping[str, Var]):
    """A mapping whose `get` is the one lookup: indexing and `in` go through it (Mapping's own go the other way,
    through a KeyError per miss)."""

    __slots__ = ()

    @abstractmethod
    def get(self, key: object, default: Any = None) -> Any:
        """The value of `key`, else `default`."""

    def __getitem__(self, key: str) -> Var:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING


class Scope(_ByGet):
    """An immutable mapping NAME -> Var; `set` gives a new one and leaves this one as it is."""

    __slots__ = ("_len", "_root")

    def __init__(self, items: Mapping[str, Var] | None = None) -> None:
        self._root: Any = _EMPTY
        self._len = 0
        for key, value in (items or {}).items():
            self._root, added = _put(self._root, 0, _Leaf(key, value, hash(key) & 0xFFFFFFFFFFFFFFFF))
            self._len += added

    def set(self, key: str, value: Var) -> Scope:
        new = Scope.__new__(Scope)
        new._root, added = _put(self._root, 0, _Leaf(key, value, hash(key) & 0xFFFFFFFFFFFFFFFF))
        new._len = self._len + added
        return new

    def get(self, key: object, default: Any = None) -> Any:
        if not isinstance(key, str):
            return default
        h = hash(key) & 0xFFFFFFFFFFFFFFFF
        node, shift = self._root, 0
        while True:
            if type(node) is _Bucket:
                return next((x.value for x in node.leaves if x.key == key), default)
            child = node[(h >> shift) & _MASK]
            if child is None:
                return default
            if type(child) is _Leaf:
                return child.value if child.key == key else default
            node, shift = child, shift + _BITS

    def __iter__(self) -> Iterator[str]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            if type(node) is _Bucket:
                yield from (x.key for x in node.leaves)
                continue
            for child in node:
                if child is None:
                    continue
                if type(child) is _Leaf:
                    yield child.key
                else:
                    stack.append(child)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"Scope({dict(self)!r})"


_MISSING = object()


class StageScope(_ByGet):
    """What an instruction inside a stage sees: the stage's ENV, then its ARGs (ENV wins, as in the builder)."""

    __slots__ = ("args", "env")

    def __init__(self, env: Scope, args: Scope) -> None:
        self.env, self.args = env, args

    def get(self, key: object, default: Any = None) -> Any:
        value = self.env.get(key, _MISSING)
        if value is _MISSING:
            value = self.args.get(key, default)
        return value

    def __iter__(self) -> Iterator[str]:
        yield from self.env
        yield from (k for k in self.args if k not in self.env)

    def __len__(self) -> int:
        return sum(1 for _ in self)
