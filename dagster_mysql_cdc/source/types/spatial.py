"""The spatial family: GEOMETRY and its subtypes as Debezium's
``io.debezium.data.geometry.Geometry`` struct ``{wkb, srid}``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..schema import ColumnSchema
from .families import Core, conversion_error

#: The lake type of every spatial column.
GEOMETRY_ARROW_TYPE = pa.struct([pa.field("wkb", pa.binary()), pa.field("srid", pa.int32())])


def geometry_core(column: ColumnSchema) -> tuple[Core, Any]:
    """GEOMETRY and subtypes: ``{"wkb": bytes, "srid": int | None}``
    (io.debezium.data.geometry.Geometry) from MySQL's internal format (4-byte little-endian SRID +
    WKB). SRID 0 (no spatial reference system given) is ``None``, as in Debezium
    (BinlogGeometryIT: ``ST_GeomFromText('POLYGON(...)')`` has ``srid`` null)."""

    def to_geometry(v: Any) -> dict[str, Any]:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise conversion_error(column, v, "Geometry")
        v = bytes(v)
        if len(v) < 4:
            raise ValueError(f"Geometry value of column {column.name!r} is shorter than its SRID prefix")
        # MySQL internal geometry format: 4-byte little-endian SRID followed by the WKB.
        srid = int.from_bytes(v[:4], "little")
        return {"wkb": v[4:], "srid": srid or None}

    return to_geometry, None
