"""``TableConverter``: the pre-built converters of one table's captured columns, per row, per
row image, per column and to an Arrow record batch."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from ..schema import ColumnSchema, TableSchema
from .columnwise import ArrayConverter, array_converter
from .converters import build_core, value_converter
from .families import Core
from .options import TypeOptions
from .schema_mapping import arrow_schema, ordered_columns

_MISSING = object()


class _LoweredRow:
    """A row image keyed by lower-case column names, built on first use."""

    __slots__ = ("row", "_d")

    def __init__(self, row: Mapping[str, Any]):
        self.row = row
        self._d: dict[str, Any] | None = None

    def get(self, lname: str) -> Any:
        if self._d is None:
            self._d = {str(k).lower(): v for k, v in self.row.items()}
        return self._d.get(lname, _MISSING)


def _raw_image_value(
    row: Mapping[str, Any],
    name: str,
    lname: str,
    none_sources: Mapping[str, str] | None,
    lowered: _LoweredRow,
) -> Any:
    """The raw value of column ``name`` in a python-mysql-replication row image, or ``_MISSING``
    when the image has no value for it (absent, or ``None`` because the column is not in the
    event's column bitmap / unchanged in a MINIMAL image). A ``None`` that the library reports as
    "empty set" is the empty SET value ``""``. Names match exactly, then case-insensitively."""
    v = row.get(name, _MISSING)
    if v is _MISSING:
        v = lowered.get(lname)
        if v is _MISSING:
            return _MISSING
    if v is None and none_sources:
        reason = none_sources.get(name)
        if reason == "empty set":
            return ""
        if reason in ("cols bitmap", "same with before values"):
            return _MISSING
    return v


def _masked_value(conv: Callable[[Any], Any], mask: Callable | None) -> Callable[[Any], Any]:
    """``conv`` followed by a column mask (:mod:`.columns`)."""
    if mask is None:
        return conv
    return lambda v: mask(conv(v))


def _masked_array(conv: ArrayConverter, mask: Callable | None) -> ArrayConverter:
    """An array converter followed by a column mask, value by value (character columns only)."""
    if mask is None:
        return conv

    def convert(values: Sequence[Any]) -> pa.Array:
        arr = conv(values)
        return pa.array([mask(v) for v in arr.to_pylist()], type=arr.type)

    return convert


class TableConverter:
    """Pre-built per-table converters (no per-row type lookup).

    Only the table's *captured* columns are converted (``options.columns``, Debezium
    ``column.include.list``/``column.exclude.list``) and their values leave every method masked
    or truncated as ``options.columns`` says (Debezium ``column.mask.*``/``column.truncate.*``), so
    every reader (snapshot, incremental snapshot, binlog, checks) sees the same captured values.

    Args:
        table: the table schema (columns are used in ordinal order), full or already captured
            (filtering is idempotent).
        options: the type options.
        source: ``"pymysql"`` or ``"binlog"`` (see :func:`value_converter`).

    Attributes:
        table: the captured table schema (``source_table`` without the excluded columns).
        source_table: the schema the converter was built from.
        columns: the captured columns in ordinal order: raw rows handed to the converter hold
            these columns only, in this order (select them with :func:`select_expression`).
        names: their names.
        masked: names of the columns whose values are masked or truncated.
        arrow_schema: :func:`arrow_schema` of the captured table.

    Raises:
        UnsupportedTypeError: a column type is not supported (names table, column, type and fix).
        ConfigurationError: the column policy leaves out a primary-key column or cannot mask a
            column (see :class:`.columns.ColumnPolicy`).
    """

    def __init__(self, table: TableSchema, options: TypeOptions, source: Literal["pymysql", "binlog"]):
        self.source_table = table
        table = options.columns.captured(table)
        self.table = table
        self.options = options
        self.source = source
        self.columns: tuple[ColumnSchema, ...] = tuple(ordered_columns(table))
        self.names: tuple[str, ...] = tuple(c.name for c in self.columns)
        qn = table.qualified_name
        self.arrow_schema: pa.Schema = arrow_schema(table, options)
        built = [build_core(c, options, source, qn) for c in self.columns]
        masks = tuple(options.columns.mask_for(table, c) for c in self.columns)
        self.masked: tuple[str, ...] = tuple(n for n, m in zip(self.names, masks) if m is not None)
        self._masks = masks
        self._cores: tuple[Core, ...] = tuple(b[0] for b in built)
        self._none_values: tuple[Any, ...] = tuple(b[1] for b in built)
        self._converters: tuple[Callable[[Any], Any], ...] = tuple(
            _masked_value(value_converter(c, options, source, table=qn), m)
            for c, m in zip(self.columns, masks)
        )
        self._lower_names = tuple(n.lower() for n in self.names)
        self._array_converters: tuple[ArrayConverter, ...] = tuple(
            _masked_array(array_converter(c, options, source, core, nv, f.type), m)
            for c, (core, nv), f, m in zip(self.columns, built, self.arrow_schema, masks)
        )
        self._text_array_converters: tuple[ArrayConverter, ...] = (
            tuple(
                _masked_array(array_converter(c, options, source, core, nv, f.type, text=True), m)
                for c, (core, nv), f, m in zip(self.columns, built, self.arrow_schema, masks)
            )
            if source == "pymysql"
            else self._array_converters
        )

    def __repr__(self) -> str:
        return f"TableConverter({self.table.qualified_name}, source={self.source!r})"

    def convert_row(self, values: Sequence[Any]) -> tuple:
        """Convert one raw row given in column (ordinal) order.

        Raises:
            ValueError: ``values`` does not have one value per column, or a value cannot be
                converted.
        """
        if len(values) != len(self._converters):
            raise ValueError(
                f"Row of {self.table.qualified_name} has {len(values)} values, expected "
                f"{len(self._converters)} ({', '.join(self.names)})"
            )
        return tuple(conv(v) for conv, v in zip(self._converters, values))

    def convert_value(self, index: int, value: Any) -> Any:
        """Convert (and mask) one raw value of the ``index``-th captured column.

        Raises:
            ValueError: the value cannot be converted.
        """
        return self._converters[index](value)

    def convert_row_dict(
        self, row: Mapping[str, Any], none_sources: Mapping[str, str] | None = None
    ) -> tuple:
        """Convert one raw row keyed by column name (python-mysql-replication row images).

        Args:
            row: ``{column name: raw value}``, e.g. ``event.rows[i]["values"]``.
            none_sources: optional python-mysql-replication ``none_sources`` of the same image
                (``event.rows[i]["none_sources"]``), which says *why* a value is ``None``. When
                given, ``"empty set"`` is converted as the empty SET ``""`` (the library returns
                an empty SET as ``None``, indistinguishable from NULL in a nullable column), and
                ``"cols bitmap"`` (column absent from a MINIMAL image) / ``"same with before
                values"`` (partial JSON) become ``None`` without conversion.

        Returns:
            The converted values in column (ordinal) order. A column missing from ``row``
            (e.g. ``binlog_row_image=MINIMAL``) becomes ``None`` without conversion, so a NOT NULL
            temporal column is *not* turned into its epoch fallback. Names are matched exactly,
            then case-insensitively.
        """
        lowered = _LoweredRow(row)
        out = []
        for name, lname, conv in zip(self.names, self._lower_names, self._converters):
            v = _raw_image_value(row, name, lname, none_sources, lowered)
            out.append(None if v is _MISSING else conv(v))
        return tuple(out)

    def key_function(self, key_columns: Sequence[str]) -> Callable[..., tuple]:
        """``f(row, none_sources=None) -> tuple``: the converted values of ``key_columns`` of one
        python-mysql-replication row image, exactly as :meth:`convert_row_dict` converts them.

        Raises:
            ValueError: a key column is not a column of the table (at build time).
        """
        specs = []
        for k in key_columns:
            try:
                i = self._lower_names.index(k.lower())
            except ValueError:
                raise ValueError(f"Key column {k!r} is not a column of {self.table.qualified_name}") from None
            specs.append((self.names[i], self._lower_names[i], self._converters[i]))

        def key(row: Mapping[str, Any], none_sources: Mapping[str, str] | None = None) -> tuple:
            lowered = _LoweredRow(row)
            out = []
            for name, lname, conv in specs:
                v = _raw_image_value(row, name, lname, none_sources, lowered)
                out.append(None if v is _MISSING else conv(v))
            return tuple(out)

        return key

    def primary_key_function(self) -> Callable[..., tuple]:
        """:meth:`key_function` of the table's primary key (built once per converter)."""
        f = self.__dict__.get("_pk_function")
        if f is None:
            f = self._pk_function = self.key_function(self.table.primary_key)
        return f

    def primary_keys_unchanged(
        self, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
    ) -> bool:
        """Whether each pair of python-mysql-replication row images (an update's before/after)
        has the same raw, non-NULL value in every primary-key column, so the converted keys are
        equal too. A cheap check without conversion; ``False`` also when it cannot tell (a key
        column missing from an image, a NULL, no primary key).
        """
        pk = self.table.primary_key
        if not pk:
            return False
        try:
            get = operator.itemgetter(*pk)
            b, a = list(map(get, before)), list(map(get, after))
        except (KeyError, TypeError):
            return False
        if b != a:
            return False
        if len(pk) == 1:
            return None not in b
        return not any(None in k for k in b)

    def convert_columns(self, rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """Convert raw rows (column order) column-wise: one list of Debezium values per column."""
        n = len(self._cores)
        for r in rows:
            if len(r) != n:
                raise ValueError(f"Row of {self.table.qualified_name} has {len(r)} values, expected {n}")
        cols: list[list[Any]] = []
        for i, (core, nv) in enumerate(zip(self._cores, self._none_values)):
            raw = [r[i] for r in rows]
            if core is None:
                col = raw
            else:
                col = [nv if v is None else core(v) for v in raw]
            mask = self._masks[i]
            cols.append(col if mask is None else [mask(v) for v in col])
        return cols

    def column_arrays(self, columns: Sequence[Sequence[Any]], *, text_values: bool = False) -> list[pa.Array]:
        """Convert raw values given per column (ordinal order) into Arrow arrays.

        Args:
            columns: one sequence of raw values (``None`` = NULL) per column, all of one length.
            text_values: (``source="pymysql"`` only) the rows were read with
                :func:`snapshot_decoders`, so integer/DOUBLE/DECIMAL/DATE/DATETIME/TIMESTAMP values
                are the server's text (``str``); the result is the same as for rows read with
                pymysql's default decoders.

        Returns:
            One array per column with the column's :func:`arrow_field` type, holding exactly
            what :func:`value_converter` gives per value. The common types (integers, DOUBLE,
            DECIMAL (p <= 38), text, ENUM, SET strings, bytes, DATE, DATETIME, TIMESTAMP, JSON
            text) are converted by Arrow (JSON: orjson) for the whole column; a column whose raw
            values are not of the expected Python type (zero dates, etc.) and every other type
            use the per-value converter.

        Raises:
            ValueError: the number of sequences differs from the number of columns, or a value
                cannot be converted.
        """
        if len(columns) != len(self._array_converters):
            raise ValueError(
                f"{len(columns)} columns of values for {self.table.qualified_name}, expected "
                f"{len(self._array_converters)} ({', '.join(self.names)})"
            )
        convs = self._text_array_converters if text_values else self._array_converters
        return [conv(values) for conv, values in zip(convs, columns)]

    def unconvertible_rows(
        self, rows: Sequence[Sequence[Any]], *, text_values: bool = False
    ) -> dict[int, tuple[str, str]]:
        """Rows holding a value the conversion rejects: ``{row index: (column, error)}`` (the
        first rejected column of each row; the error's text, which may quote the value, is left
        out for masked columns). ``rows`` and ``text_values`` as for :meth:`to_record_batch`.
        Empty when every value converts."""
        convs = self._text_array_converters if text_values else self._array_converters
        masked = set(self.masked)
        bad: dict[int, tuple[str, str]] = {}
        for i, row in enumerate(rows):
            for name, conv, v in zip(self.names, convs, row):
                if v is None:
                    continue
                try:
                    conv([v])
                except (ValueError, TypeError, OverflowError, ArithmeticError, pa.ArrowException) as e:
                    bad[i] = (name, type(e).__name__ if name in masked else f"{type(e).__name__}: {e}")
                    break
        return bad

    def to_record_batch(self, rows: Sequence[Sequence[Any]], *, text_values: bool = False) -> pa.RecordBatch:
        """Convert raw rows given in column order into a record batch with :attr:`arrow_schema`.

        Built column-wise with :meth:`column_arrays` (rows are transposed once);
        ``text_values``: see there.

        Raises:
            ValueError: a row has the wrong number of values or a value cannot be converted.
        """
        n = len(self._cores)
        if rows and set(map(len, rows)) != {n}:
            bad = next(len(r) for r in rows if len(r) != n)
            raise ValueError(f"Row of {self.table.qualified_name} has {bad} values, expected {n}")
        cols = list(zip(*rows)) if rows else [()] * n
        return pa.RecordBatch.from_arrays(
            self.column_arrays(cols, text_values=text_values), schema=self.arrow_schema
        )
