"""Read table schemas and table lists from ``information_schema``.

Debezium MySQL connector, snapshot step 5 ("read the schema of the captured tables") reads the
structure of each captured table while the global read lock is held; :func:`read_table_schemas`
is that step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .schema import ColumnSchema, TableSchema, parse_enum_values

SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def list_tables(conn: Any, databases: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """``(database, table)`` pairs of all base tables, optionally restricted to ``databases``.

    System schemas (mysql, information_schema, performance_schema, sys) are never returned.
    Views are not tables and are skipped, as in Debezium.
    """
    sql = "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'"
    params: list[Any] = []
    if databases:
        sql += " AND TABLE_SCHEMA IN (" + ",".join(["%s"] * len(databases)) + ")"
        params.extend(databases)
    sql += " ORDER BY TABLE_SCHEMA, TABLE_NAME"
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return [(db, t) for db, t in cur.fetchall() if db.lower() not in SYSTEM_DATABASES]


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def column_from_information_schema(row: dict[str, Any]) -> ColumnSchema:
    """Build a :class:`ColumnSchema` from one ``information_schema.COLUMNS`` row (dict cursor).

    MariaDB's JSON alias is stored as LONGTEXT with a ``json_valid`` CHECK constraint; the caller
    passes ``row["IS_JSON"] = True`` for those so they map to Debezium's ``io.debezium.data.Json``.
    """
    data_type = str(row["DATA_TYPE"]).lower()
    column_type = str(row["COLUMN_TYPE"]).lower()
    if row.get("IS_JSON"):
        data_type = "json"
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    if data_type in ("char", "varchar", "binary", "varbinary"):
        length = _int(row.get("CHARACTER_MAXIMUM_LENGTH"))
    elif data_type == "bit":
        length = _int(row.get("NUMERIC_PRECISION"))
    elif data_type in ("decimal", "numeric"):
        data_type = "decimal"
        precision = _int(row.get("NUMERIC_PRECISION"))
        scale = _int(row.get("NUMERIC_SCALE"))
    elif data_type in ("float", "double") and row.get("NUMERIC_SCALE") is not None:
        # FLOAT(M,D) / DOUBLE(M,D): the server reports M and D (a bare FLOAT/DOUBLE has no scale)
        precision = _int(row.get("NUMERIC_PRECISION"))
        scale = _int(row.get("NUMERIC_SCALE"))
    elif data_type in ("datetime", "timestamp", "time"):
        precision = _int(row.get("DATETIME_PRECISION")) or 0
    elif data_type == "year":
        length = 4
    enum_values = parse_enum_values(str(row["COLUMN_TYPE"])) if data_type in ("enum", "set") else ()
    return ColumnSchema(
        name=row["COLUMN_NAME"],
        data_type=data_type,
        position=int(row["ORDINAL_POSITION"]),
        nullable=str(row["IS_NULLABLE"]).upper() == "YES",
        unsigned="unsigned" in column_type,
        length=length,
        precision=precision,
        scale=scale,
        enum_values=enum_values,
        charset=row.get("CHARACTER_SET_NAME"),
        comment=row.get("COLUMN_COMMENT") or "",
    )


#: up to this many tables, :func:`read_table_schemas` names them in its queries
NAMED_TABLES_MAX = 200


def read_table_schemas(conn: Any, tables: Iterable[tuple[str, str]]) -> dict[tuple[str, str], TableSchema]:
    """Read columns, primary keys and comments of ``tables`` from ``information_schema``.

    Args:
        conn: an open pymysql connection (any cursor class).
        tables: ``(database, table)`` pairs.

    Returns:
        ``{(database, table): TableSchema}`` for each requested table that exists; a missing table
        is simply absent (the caller decides whether that is an error).
    """
    wanted = list(dict.fromkeys(tables))
    if not wanted:
        return {}
    dbs = sorted({db for db, _ in wanted})
    ph = ",".join(["%s"] * len(dbs))
    # a few tables of a large schema (a window's): name them, so the server opens only those
    # (information_schema reads every table of the schema otherwise: 0.2 s at 1,000 tables)
    names = sorted({t for _, t in wanted}) if len(wanted) <= NAMED_TABLES_MAX else []
    only = f" AND TABLE_NAME IN ({','.join(['%s'] * len(names))})" if names else ""
    args = [*dbs, *names]
    out: dict[tuple[str, str], TableSchema] = {}
    import pymysql.cursors

    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, "
            "DATA_TYPE, COLUMN_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, "
            "DATETIME_PRECISION, CHARACTER_SET_NAME, COLUMN_COMMENT, COLUMN_KEY "
            f"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN ({ph}){only} "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            args,
        )
        cols = cur.fetchall()
        json_cols = _mariadb_json_columns(cur, dbs, names)
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            f"WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA IN ({ph}){only} "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            args,
        )
        pks: dict[tuple[str, str], list[str]] = {}
        for r in cur.fetchall():
            pks.setdefault((r["TABLE_SCHEMA"], r["TABLE_NAME"]), []).append(r["COLUMN_NAME"])
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA IN ({ph}){only} AND TABLE_TYPE = 'BASE TABLE'",
            args,
        )
        comments = {(r["TABLE_SCHEMA"], r["TABLE_NAME"]): r["TABLE_COMMENT"] or "" for r in cur.fetchall()}

    by_table: dict[tuple[str, str], list[ColumnSchema]] = {}
    wanted_set = set(wanted)
    for r in cols:
        key = (r["TABLE_SCHEMA"], r["TABLE_NAME"])
        if key not in wanted_set or key not in comments:
            continue
        r = dict(r)
        r["IS_JSON"] = (key[0], key[1], r["COLUMN_NAME"]) in json_cols
        by_table.setdefault(key, []).append(column_from_information_schema(r))
    for key in wanted:
        if key in by_table:
            out[key] = TableSchema(
                database=key[0],
                table=key[1],
                columns=tuple(by_table[key]),
                primary_key=tuple(pks.get(key, ())),
                comment=comments.get(key, ""),
            )
    return out


def _mariadb_json_columns(
    cur: Any, dbs: Sequence[str], names: Sequence[str] = ()
) -> set[tuple[str, str, str]]:
    """Columns declared JSON on MariaDB (stored as LONGTEXT + ``CHECK (json_valid(col))``) in
    ``dbs`` (of the tables ``names`` only, when given)."""
    ph = ",".join(["%s"] * len(dbs))
    only = f" AND TABLE_NAME IN ({','.join(['%s'] * len(names))})" if names else ""
    try:
        cur.execute(
            "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            f"WHERE CONSTRAINT_SCHEMA IN ({ph}){only}",
            [*dbs, *names],
        )
    except Exception:  # MySQL < 8.0.16 has no CHECK_CONSTRAINTS table
        return set()
    out: set[tuple[str, str, str]] = set()
    for r in cur.fetchall():
        clause = (r.get("CHECK_CLAUSE") or "").strip().lower()
        if clause.startswith("json_valid(") and clause.endswith(")"):
            col = clause[len("json_valid(") : -1].strip().strip("`")
            if r.get("TABLE_NAME"):
                out.add((r["CONSTRAINT_SCHEMA"], r["TABLE_NAME"], col))
    # CHECK_CONSTRAINTS column names are lower-cased above; match case-insensitively.
    return {(d, t, c) for d, t, c in out} | _case_variants(cur, out)


def _case_variants(cur: Any, found: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    if not found:
        return set()
    out = set()
    for d, t, c in found:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
            (d, t),
        )
        for r in cur.fetchall():
            if r["COLUMN_NAME"].lower() == c:
                out.add((d, t, r["COLUMN_NAME"]))
    return out
