"""Character sets: bytes per character, the TEXT/BLOB size ladder, charset names of collations."""

from __future__ import annotations

from collections.abc import Mapping

# maximum bytes per character (information_schema.CHARACTER_SETS.MAXLEN)
MBMAXLEN = {
    "big5": 2,
    "dec8": 1,
    "cp850": 1,
    "hp8": 1,
    "koi8r": 1,
    "latin1": 1,
    "latin2": 1,
    "swe7": 1,
    "ascii": 1,
    "ujis": 3,
    "sjis": 2,
    "hebrew": 1,
    "tis620": 1,
    "euckr": 2,
    "koi8u": 1,
    "gb2312": 2,
    "greek": 1,
    "cp1250": 1,
    "gbk": 2,
    "latin5": 1,
    "armscii8": 1,
    "utf8mb3": 3,
    "ucs2": 2,
    "cp866": 1,
    "keybcs2": 1,
    "macce": 1,
    "macroman": 1,
    "cp852": 1,
    "latin7": 1,
    "utf8mb4": 4,
    "cp1251": 1,
    "utf16": 4,
    "utf16le": 4,
    "cp1256": 1,
    "cp1257": 1,
    "utf32": 4,
    "binary": 1,
    "geostd8": 1,
    "cp932": 2,
    "eucjpms": 3,
    "gb18030": 4,
}

#: Data types that have a character set (ENUM and SET included).
CHAR_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
#: The TEXT types, smallest first, and the most bytes each holds.
TEXT_MAX = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
#: The BLOB types, smallest first, and the most bytes each holds.
BLOB_MAX = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
#: The binary type a character type becomes with ``CHARACTER SET binary`` (MySQL's rule).
TEXT_TO_BLOB = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}


def normalize_charset(name: str | None) -> str | None:
    """A character set name as ``information_schema`` spells it: unquoted, lower-case, ``utf8``
    as ``utf8mb3``; ``None`` for no name."""
    if name is None:
        return None
    cs = name.strip().strip("'\"`").lower()
    if not cs:
        return None
    return "utf8mb3" if cs == "utf8" else cs


def charset_of_collation(collation: str | None) -> str | None:
    """``utf8mb4_bin`` -> ``utf8mb4``; ``None`` for charset-independent names (``uca1400_ai_ci``)."""
    if not collation:
        return None
    coll = collation.strip().strip("'\"`").lower()
    if coll == "binary":
        return "binary"
    prefix = coll.split("_", 1)[0]
    cs = normalize_charset(prefix)
    return cs if cs in MBMAXLEN else None


def smallest_type(sizes: Mapping[str, int], needed: int) -> str:
    """The first type of ``sizes`` (``{type: most bytes}``, smallest first: :data:`TEXT_MAX`,
    :data:`BLOB_MAX`) that holds ``needed`` bytes, else the largest (MySQL picks the smallest
    TEXT/BLOB type for a ``TEXT(n)``/``BLOB(n)`` length)."""
    for name, size in sizes.items():  # ordered small -> large
        if needed <= size:
            return name
    return list(sizes)[-1]
