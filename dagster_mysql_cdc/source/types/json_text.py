"""JSON values (Debezium ``io.debezium.data.Json``): MariaDB's text JSON as stored, MySQL's binary
JSON as compact JSON text (orjson where it is byte-identical to the ``json`` module), per value
and for a whole column."""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

try:  # a declared dependency; the json module is the (slower, identical) fallback
    import orjson as _orjson

    _orjson_loads, _orjson_dumps = _orjson.loads, _orjson.dumps
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

from ..schema import ColumnSchema
from .families import Core, FastPath
from .strings import text_core


def _json_key(k: Any) -> str:
    if isinstance(k, (bytes, bytearray)):
        k = bytes(k).decode("utf-8", "replace")
    return json.dumps(str(k), ensure_ascii=False)


def _json_text(obj: Any) -> str:
    """Compact JSON text of a value decoded by python-mysql-replication's binary JSON parser."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, dict):
        return "{" + ",".join(_json_key(k) + ":" + _json_text(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_json_text(v) for v in obj) + "]"
    if isinstance(obj, (bytes, bytearray)):
        return json.dumps(bytes(obj).decode("utf-8", "replace"), ensure_ascii=False)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return json.dumps(obj)
    if isinstance(obj, decimal.Decimal):
        # MySQL stores JSON non-integer numbers as DOUBLE; a DECIMAL only appears through
        # CAST(... AS JSON). Render through float so text and binary sources agree.
        return json.dumps(float(obj))
    if isinstance(obj, _dt.datetime):
        return json.dumps(obj.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(obj, _dt.date):
        return json.dumps(obj.isoformat())
    if isinstance(obj, _dt.time):
        return json.dumps(obj.strftime("%H:%M:%S.%f"))
    return json.dumps(str(obj), ensure_ascii=False)


def _compact_json_text_stdlib(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text  # not valid JSON (MariaDB LONGTEXT without the CHECK): keep as stored
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)


# orjson output that may differ from ``json.dumps``: a float in exponent notation (Python writes
# ``1e+16``/``1e-05``, orjson ``1e16``), or a float below 1e-4 that orjson writes in plain notation
# (``0.00001``); integers beyond 64 bits, which orjson parses as floats, also end up in exponent
# notation. Such text (and its false positives, e.g. a string containing ``"2e5"``) takes the
# ``json`` module path.
_ORJSON_RISKY = re.compile(r"[0-9][eE]|0\.0000")


def _compact_json_text(text: str) -> str:
    """Compact JSON text (``json.dumps(json.loads(text), separators=(",", ":"),
    ensure_ascii=False)``), byte-identical to it, computed with orjson where that is provably the
    same: orjson's compact output equals ``json``'s for everything but the number renderings
    matched by :data:`_ORJSON_RISKY`, and it rejects what ``json`` renders specially (``NaN``,
    ``Infinity``, lone surrogates, nesting deeper than 255); all of those fall back to ``json``.
    Text that is not valid JSON is returned unchanged."""
    if _orjson is not None:
        try:
            out = _orjson_dumps(_orjson_loads(text)).decode()
        except (ValueError, TypeError):  # orjson.JSONDecodeError / JSONEncodeError are ValueError/TypeError
            return _compact_json_text_stdlib(text)
        if _ORJSON_RISKY.search(out) is None:
            return out
    return _compact_json_text_stdlib(text)


def json_is_text(column: ColumnSchema) -> bool:
    """Whether a JSON column stores its documents as text: MariaDB's JSON is an alias of
    ``LONGTEXT`` (with a ``json_valid`` CHECK), so it has a character set; MySQL's binary JSON has
    none (``information_schema.COLUMNS.CHARACTER_SET_NAME`` is NULL, as in the DDL parser's
    columns)."""
    return column.charset is not None


def json_core(column: ColumnSchema, binlog: bool) -> tuple[Core, Any]:
    """JSON (Debezium io.debezium.data.Json). Text JSON (MariaDB, :func:`json_is_text`): the
    stored text as is, as Debezium passes it through -- no re-serialisation, so numbers keep every
    digit, duplicate keys and the server's spacing stay. MySQL's binary JSON: compact JSON text
    of the decoded document (the snapshot's text is compacted the same way, so both sources
    agree). A partial JSON update (JsonDiff) raises ValueError (``binlog_row_value_options`` must
    be empty, as Debezium requires)."""
    if json_is_text(column):
        return text_core(column, "JSON text")

    def to_json(v: Any) -> str:
        if isinstance(v, str):
            return _compact_json_text(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            if binlog:
                # MySQL binary JSON: a top-level JSON *string* is returned as bytes.
                return json.dumps(bytes(v).decode("utf-8", "replace"), ensure_ascii=False)
            return _compact_json_text(bytes(v).decode("utf-8", "replace"))
        if type(v).__name__ == "JsonDiff":
            raise ValueError(
                f"Column {column.name!r} received a partial JSON update (JsonDiff); set "
                "binlog_row_value_options='' on the server (Debezium requires the same)"
            )
        return _json_text(v)

    return to_json, None


def json_array_path(column: ColumnSchema, t: str) -> FastPath | None:
    """Text JSON (MariaDB): the strings as they are. MySQL JSON text values re-serialised by
    orjson (when installed); values orjson renders differently from the json module (see
    :data:`_ORJSON_RISKY`) are redone by the json module."""
    if t != "json":
        return None
    if json_is_text(column):

        def stored(vs: Sequence[Any]) -> pa.Array | None:
            arr = pa.array(vs, from_pandas=False)  # inferred: only all-str (or all-None) is used
            if arr.type == pa.string():
                return arr
            return arr.cast(pa.string()) if arr.type == pa.null() else None

        return stored
    if _orjson is None:
        return None
    loads, dumps = _orjson_loads, _orjson_dumps

    def json_texts(vs: Sequence[Any]) -> pa.Array | None:
        kind = pa.array(vs, from_pandas=False).type
        if kind != pa.string():  # bytes/objects of MySQL binary JSON, or all NULL
            return None
        # orjson.loads/dumps raise (-> per value, json module) on what json renders
        # differently: NaN/Infinity, lone surrogates, deep nesting
        # (decoded at once: keeping orjson's bytes objects alive is twice as slow)
        out = pa.array([None if v is None else dumps(loads(v)).decode() for v in vs], pa.string())
        risky = pc.match_substring_regex(out, _ORJSON_RISKY.pattern)
        if pc.any(risky).as_py():
            texts = out.to_pylist()
            for i in pc.indices_nonzero(risky).to_pylist():
                texts[i] = _compact_json_text_stdlib(vs[i])
            out = pa.array(texts, pa.string())
        return out

    return json_texts
