"""Which columns are captured, and how captured values are masked or truncated.

The Debezium MySQL connector properties implemented here (all patterns are regular expressions
over the fully-qualified column name ``database.table.column``, full match, case-insensitive):

``column.include.list`` / ``column.exclude.list``
    which columns appear in change-event values (``before``/``after``), the current state, the lake
    schemas, snapshots (only captured columns are ``SELECT``-ed) and the reconciliation checks
    (checksums compare the captured columns only). Not both. The schema history keeps the full
    table definitions: binlog row images are positional and are decoded with every column.
``column.truncate.to.<n>.chars``
    character values longer than ``n`` characters are cut to their first ``n``.
``column.mask.with.<n>.chars``
    character values are replaced by ``n`` asterisks (``NULL`` too, as Debezium does).
``column.mask.hash.<algorithm>.with.salt.<salt>`` (and ``column.mask.hash.v2.…``)
    character values are replaced by the lower-case hex digest of ``algorithm`` over the salt's
    UTF-8 bytes followed by the value's bytes; ``NULL`` stays ``NULL``. Hashing strategy ``v1``
    (Debezium's ``column.mask.hash.``) hashes the value's Java serialization
    (``ObjectOutputStream.writeObject(String)``), ``v2`` (``column.mask.hash.v2.``) its UTF-8 bytes,
    so hashes computed here equal Debezium's. As in Debezium, the digest is shortened to the
    column's declared length for ``CHAR(n)``/``VARCHAR(n)``. The same value always hashes the same
    way (same salt), so hashed key and foreign-key columns stay joinable.

``message.key.columns``
    ``{table pattern: [columns]}`` (Debezium's ``<db.table regex>:<col>,<col>;...``): the key of
    matching tables, for a keyless table or to override a primary key. It keys the change log's
    ``key`` struct, the current state's merges, incremental-snapshot chunks and the checks, so the
    columns must identify a row (rows with equal keys collapse into one state row, and keyset
    chunking skips duplicates at chunk boundaries). The first matching pattern wins.

Every mask applies after the value's Debezium conversion, inside :class:`~.types.TableConverter`,
so snapshots, incremental snapshots, binlog events, repairs and the checks' source reads all see
the same masked values and the original value never reaches the lake, the logs or run metadata.

Like Debezium, a column matching several masking rules gets the first one in the order
truncate, mask with chars, hash; unlike Debezium, that ambiguity is refused
(:class:`~..errors.ConfigurationError`) because the later rule silently not applying could leak a
value that was meant to be hashed. Also refused (Debezium ignores them silently): a masking rule
matching a column that is not character-based, masking or truncating a primary-key column
(every key would collide; hashing one is allowed), and leaving a primary-key column out of the
captured columns (the lake's current state is keyed by it).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import ConfigurationError
from .schema import ColumnSchema, TableSchema

#: Column types whose values Debezium's column mappers mask/truncate (JDBC CHAR/VARCHAR/
#: LONGVARCHAR; MySQL ENUM and SET are CHAR columns to Debezium). Other types pass through there;
#: here a masking rule matching them is a configuration error.
MASKABLE_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})

#: Java ``MessageDigest`` algorithm names (upper-cased) → ``hashlib`` names.
HASH_ALGORITHMS: dict[str, str] = {
    "MD5": "md5",
    "SHA": "sha1",
    "SHA1": "sha1",
    "SHA-1": "sha1",
    "SHA-224": "sha224",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
    "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256",
    "SHA3-224": "sha3_224",
    "SHA3-256": "sha3_256",
    "SHA3-384": "sha3_384",
    "SHA3-512": "sha3_512",
}
HASH_VERSIONS = ("v1", "v2")

Mask = Callable[[str | None], str | None]


def _compile(patterns: Sequence[str], what: str) -> list[re.Pattern]:
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p.strip():
            raise ConfigurationError(
                f"{what}: {p!r} is not a regular expression over 'database.table.column'"
            )
        try:
            out.append(re.compile(p.strip(), re.IGNORECASE))
        except re.error as e:
            raise ConfigurationError(f"{what} entry {p!r} is not a valid regular expression: {e}") from None
    return out


def _modified_utf8(s: str) -> bytes:
    """Java's modified UTF-8 (``DataOutput.writeUTF``): U+0000 as ``C0 80``, characters outside
    the BMP as two 3-byte surrogates."""
    out = bytearray()
    for ch in s:
        cp = ord(ch)
        units = [cp] if cp < 0x10000 else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        for u in units:
            if 0 < u < 0x80:
                out.append(u)
            elif u < 0x800:
                out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
            else:
                out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)


def java_serialized_string(s: str) -> bytes:
    """The bytes of ``new ObjectOutputStream(out).writeObject(s)`` for a Java ``String``: stream
    header ``AC ED 00 05``, then ``TC_STRING`` (``74``) with a 2-byte length, or ``TC_LONGSTRING``
    (``7C``) with an 8-byte length above 65535 bytes, then the modified UTF-8 bytes. What
    Debezium's hashing strategy ``V1`` hashes."""
    data = _modified_utf8(s)
    if len(data) <= 0xFFFF:
        return b"\xac\xed\x00\x05\x74" + struct.pack(">H", len(data)) + data
    return b"\xac\xed\x00\x05\x7c" + struct.pack(">q", len(data)) + data


def hash_mask(algorithm: str, salt: str, version: str = "v1", length: int | None = None) -> Mask:
    """Debezium's ``column.mask.hash.<algorithm>.with.salt.<salt>`` (``version="v1"``) or
    ``column.mask.hash.v2.…`` (``"v2"``) value mapper.

    Returns:
        ``f(value) -> hex digest`` of ``algorithm`` over ``salt`` (UTF-8) + the value's bytes
        (v1: Java serialization, v2: UTF-8), cut to ``length`` characters when given (the
        column's declared length); ``None`` maps to ``None``.

    Raises:
        ConfigurationError: unknown algorithm or version.
    """
    name = HASH_ALGORITHMS.get(algorithm.strip().upper())
    if name is None:
        raise ConfigurationError(
            f"column_mask_hash algorithm {algorithm!r} is not supported; use one of "
            + ", ".join(sorted(HASH_ALGORITHMS))
            + " (Java MessageDigest names, as in Debezium's column.mask.hash.<algorithm>.with.salt.<salt>)"
        )
    if version not in HASH_VERSIONS:
        raise ConfigurationError(
            f"column_mask_hash_version {version!r} is not valid; use 'v1' (Debezium column.mask.hash.) "
            "or 'v2' (column.mask.hash.v2.)"
        )
    salted = hashlib.new(name, salt.encode("utf-8"))
    encode = java_serialized_string if version == "v1" else (lambda s: s.encode("utf-8"))
    cut = length if length and length > 0 else None

    def mask(value: str | None) -> str | None:
        if value is None:
            return None
        h = salted.copy()
        h.update(encode(value if isinstance(value, str) else str(value)))
        digest = h.hexdigest()
        return digest[:cut] if cut else digest

    return mask


def chars_mask(n: int) -> Mask:
    """Debezium's ``column.mask.with.<n>.chars``: every value (``NULL`` included) becomes ``n``
    asterisks."""
    masked = "*" * n
    return lambda value: masked


def truncate_mask(n: int) -> Mask:
    """Debezium's ``column.truncate.to.<n>.chars``: values longer than ``n`` characters keep their
    first ``n`` (Python characters, i.e. code points; Java counts UTF-16 units, which differs only
    for characters outside the BMP)."""
    return lambda value: value if value is None or len(value) <= n else value[:n]


def _rules(mapping: Mapping[str, int] | Sequence[tuple[str, int]], what: str) -> tuple[tuple[str, int], ...]:
    items = list(mapping.items()) if isinstance(mapping, Mapping) else list(mapping)
    out = []
    for pattern, n in items:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigurationError(
                f"{what}[{pattern!r}] = {n!r}: the number of characters must be a positive integer"
            )
        out.append((pattern, n))
    return tuple(out)


@dataclass(frozen=True)
class ColumnPolicy:
    """Captured columns and value masks (see the module docs for the Debezium properties).

    Attributes:
        include_list / exclude_list: ``column.include.list`` / ``column.exclude.list``.
        truncate: ``(pattern, n)`` pairs: ``column.truncate.to.<n>.chars = pattern``.
        mask_with_chars: ``(pattern, n)`` pairs: ``column.mask.with.<n>.chars = pattern``.
        mask_hash: ``(pattern, algorithm)`` pairs: ``column.mask.hash.<algorithm>.with.salt.<salt>``.
        hash_salt: the salt of every hashed column (a secret: not part of ``repr``).
        hash_version: ``v1`` (``column.mask.hash.``) or ``v2`` (``column.mask.hash.v2.``).
        message_key_columns: ``(table pattern, columns)`` pairs: ``message.key.columns``.

    Raises:
        ConfigurationError: include and exclude lists both set, an invalid regex, a non-positive
            length, an unknown algorithm, or hash rules without a salt.
    """

    include_list: tuple[str, ...] = ()
    exclude_list: tuple[str, ...] = ()
    truncate: tuple[tuple[str, int], ...] = ()
    mask_with_chars: tuple[tuple[str, int], ...] = ()
    mask_hash: tuple[tuple[str, str], ...] = ()
    hash_salt: str = field(default="", repr=False)
    hash_version: Literal["v1", "v2"] = "v1"
    message_key_columns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    _inc: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)
    _exc: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)
    _masks: list[tuple[str, re.Pattern, str, object]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    _keys: list[tuple[re.Pattern, tuple[str, ...]]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.include_list and self.exclude_list:
            raise ConfigurationError(
                "column_include_list and column_exclude_list cannot both be set (Debezium rule); keep one"
            )
        object.__setattr__(self, "include_list", tuple(self.include_list))
        object.__setattr__(self, "exclude_list", tuple(self.exclude_list))
        object.__setattr__(self, "truncate", _rules(self.truncate, "column_truncate_to_chars"))
        object.__setattr__(self, "mask_with_chars", _rules(self.mask_with_chars, "column_mask_with_chars"))
        hashes = (
            tuple(self.mask_hash.items()) if isinstance(self.mask_hash, Mapping) else tuple(self.mask_hash)
        )
        object.__setattr__(self, "mask_hash", hashes)
        object.__setattr__(self, "_inc", _compile(self.include_list, "column_include_list") or None)
        object.__setattr__(self, "_exc", _compile(self.exclude_list, "column_exclude_list") or None)
        masks: list[tuple[str, re.Pattern, str, object]] = []
        for pattern, n in self.truncate:
            masks += [
                ("column_truncate_to_chars", p, pattern, n)
                for p in _compile([pattern], "column_truncate_to_chars")
            ]
        for pattern, n in self.mask_with_chars:
            masks += [
                ("column_mask_with_chars", p, pattern, n)
                for p in _compile([pattern], "column_mask_with_chars")
            ]
        for pattern, algorithm in hashes:
            hash_mask(str(algorithm), "", self.hash_version)  # validates algorithm and version
            masks += [
                ("column_mask_hash", p, pattern, algorithm) for p in _compile([pattern], "column_mask_hash")
            ]
        if hashes and not self.hash_salt:
            raise ConfigurationError(
                "column_mask_hash is set but column_mask_hash_salt is empty: set a secret salt "
                "(e.g. dg.EnvVar('CDC_MASK_SALT')); without one, hashes of guessable values can be reversed"
            )
        if self.hash_version not in HASH_VERSIONS:
            raise ConfigurationError(
                f"column_mask_hash_version {self.hash_version!r} is not valid; use 'v1' or 'v2'"
            )
        object.__setattr__(self, "_masks", masks)
        items = (
            list(self.message_key_columns.items())
            if isinstance(self.message_key_columns, Mapping)
            else list(self.message_key_columns)
        )
        keys = []
        for pattern, cols in items:
            cols = (cols,) if isinstance(cols, str) else tuple(cols)
            if not cols or not all(isinstance(c, str) and c.strip() for c in cols):
                raise ConfigurationError(
                    f"message_key_columns[{pattern!r}] = {list(cols)!r}: give one or more column names"
                )
            keys.append((pattern, tuple(c.strip() for c in cols)))
        object.__setattr__(self, "message_key_columns", tuple(keys))
        object.__setattr__(
            self,
            "_keys",
            [(p, cols) for pattern, cols in keys for p in _compile([pattern], "message_key_columns")],
        )

    def __bool__(self) -> bool:
        return bool(self.include_list or self.exclude_list or self._masks or self._keys)

    def keyed(self, table: TableSchema) -> TableSchema:
        """``table`` with its ``message.key.columns`` as primary key (the first matching pattern);
        the same object when no pattern matches or the key is unchanged.

        Raises:
            ConfigurationError: a key column does not exist in the table.
        """
        for p, cols in self._keys:
            if not p.fullmatch(table.qualified_name):
                continue
            try:
                key = tuple(table.column(c).name for c in cols)
            except KeyError:
                missing = [c for c in cols if not table.has_column(c)]
                raise ConfigurationError(
                    f"message_key_columns[{p.pattern!r}] names {missing} for {table.qualified_name}, which "
                    f"has no such column(s) (columns: {', '.join(table.column_names)})"
                ) from None
            return table if key == table.primary_key else replace(table, primary_key=key)
        return table

    @property
    def hides_values(self) -> bool:
        """Whether some column values must not appear anywhere (excluded or masked columns)."""
        return bool(self.include_list or self.exclude_list or self._masks)

    @property
    def has_masks(self) -> bool:
        """Whether any truncate/mask/hash rule is configured."""
        return bool(self._masks)

    @staticmethod
    def qualified(table: TableSchema, column: ColumnSchema | str) -> str:
        """``database.table.column``, what the patterns match."""
        name = column if isinstance(column, str) else column.name
        return f"{table.database}.{table.table}.{name}"

    def is_captured(self, table: TableSchema, column: ColumnSchema | str) -> bool:
        """Whether the column passes ``column.include.list`` / ``column.exclude.list``."""
        fq = self.qualified(table, column)
        if self._inc is not None and not any(p.fullmatch(fq) for p in self._inc):
            return False
        if self._exc is not None and any(p.fullmatch(fq) for p in self._exc):
            return False
        return True

    def captured(self, table: TableSchema) -> TableSchema:
        """``table`` with only its captured columns (positions renumbered) and its message key
        (:meth:`keyed`); the same object when neither changes anything.

        Raises:
            ConfigurationError: a primary-key column is not captured.
        """
        table = self.keyed(table)
        if self._inc is None and self._exc is None:
            return table
        keep = [c for c in table.columns if self.is_captured(table, c)]
        if len(keep) == len(table.columns):
            return table
        kept = {c.name.lower() for c in keep}
        lost = [k for k in table.primary_key if k.lower() not in kept]
        if lost:
            raise ConfigurationError(
                f"Key column(s) {', '.join(self.qualified(table, k) for k in lost)} are left out by "
                "column_include_list/column_exclude_list, but the lake's current state is keyed by them. "
                "Capture them (adjust the lists) and hash them with column_mask_hash if they are sensitive."
            )
        if not keep:
            raise ConfigurationError(
                f"column_include_list/column_exclude_list leave no column of {table.qualified_name}; "
                "exclude the table with table_exclude_list instead, or include some of its columns"
            )
        return table.with_columns(keep)

    def masked_key(self, table: TableSchema | None) -> list[str]:
        """Key columns (primary or message key) of ``table`` that a masking rule matches
        (``[]`` for ``None``).

        Incremental snapshots, key-range partitions and repairs keep *raw* key values (chunk
        bounds, partition bounds, candidate keys) in the sensor cursor, run tags and the lake's
        plans, so they are refused for such tables: the original key values would leak.
        """
        if table is None or not self._masks:
            return []
        keyed = self.keyed(table)
        if not keyed.primary_key:
            return []
        out = []
        for k in keyed.primary_key:
            fq = self.qualified(keyed, k)
            if any(p.fullmatch(fq) for _, p, _, _ in self._masks):
                out.append(k)
        return out

    def checked(self, table: TableSchema) -> TableSchema:
        """:meth:`captured` of ``table``, with every column's mask rule checked (what a
        converter of the table would refuse is refused here, without building one).

        Raises:
            ConfigurationError: see :meth:`captured` and :meth:`mask_for`.
        """
        captured = self.captured(table)
        for c in captured.columns:
            self.mask_for(captured, c)
        return captured

    def mask_for(self, table: TableSchema, column: ColumnSchema) -> Mask | None:
        """The value mask of one captured column (``None``: values pass unchanged).

        Raises:
            ConfigurationError: the column matches several masking rules, is not character-based,
                or is a primary-key column matched by a truncate/mask-with-chars rule.
        """
        if not self._masks:
            return None
        fq = self.qualified(table, column)
        hits = [(what, raw, arg) for what, p, raw, arg in self._masks if p.fullmatch(fq)]
        if not hits:
            return None
        if len({(w, r) for w, r, _ in hits}) > 1:
            rules = ", ".join(f"{w}[{r!r}]" for w, r, _ in hits)
            raise ConfigurationError(
                f"Column {fq} matches several masking rules ({rules}); Debezium would apply only the "
                "first (truncate, then mask, then hash). Narrow the patterns so each column has one rule."
            )
        what, raw, arg = hits[0]
        if column.data_type not in MASKABLE_TYPES:
            raise ConfigurationError(
                f"{what}[{raw!r}] matches {fq} of type {column.column_type}, but only character columns "
                f"({', '.join(sorted(MASKABLE_TYPES))}) can be masked or truncated (Debezium passes other "
                "types through unmasked). Narrow the pattern, or leave the column out with column_exclude_list."
            )
        is_key = column.name.lower() in {k.lower() for k in table.primary_key}
        if is_key and what != "column_mask_hash":
            raise ConfigurationError(
                f"{what}[{raw!r}] matches primary-key column {fq}: every key would collide in the lake's "
                "current state. Hash it with column_mask_hash instead (keys stay distinct and joinable)."
            )
        if what == "column_truncate_to_chars":
            return truncate_mask(int(arg))  # type: ignore[call-overload]
        if what == "column_mask_with_chars":
            return chars_mask(int(arg))  # type: ignore[call-overload]
        length = column.length if column.data_type in ("char", "varchar") else None
        return hash_mask(str(arg), self.hash_salt, self.hash_version, length)

    def describe(self) -> dict[str, object]:
        """What is configured, without the salt (for logs and run metadata)."""
        return {
            "column_include_list": list(self.include_list),
            "column_exclude_list": list(self.exclude_list),
            "column_truncate_to_chars": dict(self.truncate),
            "column_mask_with_chars": dict(self.mask_with_chars),
            "column_mask_hash": dict(self.mask_hash),
            "column_mask_hash_version": self.hash_version,
            "message_key_columns": {p: list(c) for p, c in self.message_key_columns},
        }
