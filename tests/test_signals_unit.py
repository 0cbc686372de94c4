"""Signals, safe ``additional-conditions`` filters and incremental-snapshot state (pure, no services)."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pytest

from dagster_mysql_cdc.engine.incremental import (
    IncrementalSnapshotError,
    IncrementalState,
    TableProgress,
    chunk_id_for,
    decode_key,
    encode_key,
    start_snapshot,
    stop_snapshot,
    with_paused,
)
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
from dagster_mysql_cdc.source.signals import (
    SIGNAL_TYPES,
    InvalidSignal,
    Signal,
    UnsafeFilter,
    matches_collection,
    parse_signal,
    signal_table_sql,
    validate_filter,
)

COLUMNS = ["id", "name", "qty", "created"]


def row(type_: str | None, data=None, id_: str | None = "sig-1") -> dict:
    return {"id": id_, "type": type_, "data": data}


# -- parse_signal ----------------------------------------------------------------------------------


def test_execute_snapshot_defaults_to_incremental():
    s = parse_signal(row("execute-snapshot", '{"data-collections": ["inv.customers", "inv\\\\.ord.*"]}'))
    assert s == Signal(
        id="sig-1",
        type="execute-snapshot",
        data_collections=("inv.customers", "inv\\.ord.*"),
        snapshot_type="incremental",
        conditions={},
        raw={"data-collections": ["inv.customers", "inv\\.ord.*"]},
    )


def test_execute_snapshot_collections_as_string_and_blocking_type():
    s = parse_signal(row("execute-snapshot", '{"data-collections": "inv.customers", "type": "BLOCKING"}'))
    assert s.data_collections == ("inv.customers",)
    assert s.snapshot_type == "blocking"
    s = parse_signal(row("execute-snapshot", '{"data-collections": ["inv.a"], "type": "incremental"}'))
    assert s.snapshot_type == "incremental"


def test_execute_snapshot_additional_conditions():
    data = {
        "data-collections": ["inv.a", "inv.b"],
        "additional-conditions": [
            {"data-collection": "inv.a", "filter": "id > 10"},
            {"data-collection": "inv.b", "filter": "qty BETWEEN 1 AND 5"},
        ],
    }
    s = parse_signal(row("execute-snapshot", json.dumps(data)))
    assert s.conditions == {"inv.a": "id > 10", "inv.b": "qty BETWEEN 1 AND 5"}
    assert s.raw == data


def test_stop_snapshot_with_and_without_collections():
    assert parse_signal(
        row("stop-snapshot", '{"data-collections": ["inv.a"], "type": "incremental"}')
    ).data_collections == ("inv.a",)
    assert parse_signal(row("stop-snapshot", '{"type": "incremental"}')).data_collections == ()
    assert parse_signal(row("stop-snapshot", None)).data_collections == ()
    assert parse_signal(row("stop-snapshot", '{"data-collections": []}')).data_collections == ()


@pytest.mark.parametrize("data", [None, "", "{}", '{"type": "incremental"}'])
@pytest.mark.parametrize("type_", ["pause-snapshot", "resume-snapshot"])
def test_pause_resume(type_, data):
    s = parse_signal(row(type_, data))
    assert s.type == type_ and s.id == "sig-1" and s.data_collections == ()


def test_log_signal():
    s = parse_signal(row("log", '{"message": "checkpoint at {}"}', id_="log-1"))
    assert (s.type, s.id, s.message) == ("log", "log-1", "checkpoint at {}")
    with pytest.raises(InvalidSignal, match=r"'log-1' \(log\) needs data \{\"message\""):
        parse_signal(row("log", '{"msg": "x"}', id_="log-1"))
    with pytest.raises(InvalidSignal, match="needs data"):
        parse_signal(row("log", '{"message": 5}'))
    with pytest.raises(InvalidSignal, match="needs data"):
        parse_signal(row("log", None))


@pytest.mark.parametrize("type_", ["snapshot-window-open", "snapshot-window-close"])
def test_watermark_rows(type_):
    s = parse_signal(row(type_, "snap-1-3", id_="snap-1-3-o"))
    assert (s.type, s.id, s.raw) == (type_, "snap-1-3-o", {"data": "snap-1-3"})


def test_every_signal_type_parses():
    for t in SIGNAL_TYPES:
        data = {"execute-snapshot": '{"data-collections": ["d.t"]}', "log": '{"message": "m"}'}.get(t)
        assert parse_signal(row(t, data)).type == t


def test_type_is_stripped():
    assert parse_signal(row("  log ", '{"message": "m"}')).type == "log"


def test_bytes_values_are_decoded():
    s = parse_signal({"id": b"sig-b", "type": b"execute-snapshot", "data": b'{"data-collections": ["d.t"]}'})
    assert (s.id, s.type, s.data_collections) == ("sig-b", "execute-snapshot", ("d.t",))
    s = parse_signal({"id": b"sig-c", "type": b"log", "data": b'{"message": "caf\\u00e9"}'})
    assert s.message == "café"


@pytest.mark.parametrize(
    "data", ['{"data-collections": ["d.t"', "not json", "{'data-collections': ['d.t']}", "{,}"]
)
def test_malformed_json(data):
    with pytest.raises(InvalidSignal, match=r"'sig-1' \(execute-snapshot\) has malformed JSON data") as e:
        parse_signal(row("execute-snapshot", data))
    assert data[:20] in str(e.value)


@pytest.mark.parametrize(
    ("data", "kind"),
    [("[1, 2]", "list"), ('"d.t"', "str"), ("42", "int"), ("null", "NoneType"), ("true", "bool")],
)
def test_data_not_an_object(data, kind):
    with pytest.raises(InvalidSignal, match=f"data must be a JSON object, got {kind}"):
        parse_signal(row("execute-snapshot", data))


@pytest.mark.parametrize("type_", ["execute_snapshot", "snapshot", "DROP TABLE x", "Execute-Snapshot"])
def test_unknown_type(type_):
    with pytest.raises(InvalidSignal, match="unknown type") as e:
        parse_signal(row(type_, '{"data-collections": ["d.t"]}'))
    assert "execute-snapshot" in str(e.value), "the message lists the supported types"


@pytest.mark.parametrize(
    "r",
    [
        {"id": None, "type": "log", "data": '{"message": "m"}'},
        {"id": "", "type": "log", "data": '{"message": "m"}'},
        {"id": "s", "type": None, "data": None},
        {"id": "s", "type": "", "data": None},
        {"type": "log", "data": '{"message": "m"}'},
        {"id": "s"},
        {},
        {"UNKNOWN_COL0": "s", "UNKNOWN_COL1": "log", "UNKNOWN_COL2": "{}"},
    ],
)
def test_missing_id_or_type(r):
    with pytest.raises(InvalidSignal, match="without id or type"):
        parse_signal(r)


@pytest.mark.parametrize("colls", ["5", "[5]", '["d.t", 7]', '[""]', '{"d": "t"}', "null", '[["d.t"]]'])
def test_bad_data_collections(colls):
    with pytest.raises(InvalidSignal, match="data-collections must be a list of table names/regexes"):
        parse_signal(row("execute-snapshot", f'{{"data-collections": {colls}}}'))


def test_execute_snapshot_needs_collections():
    for data in ("{}", '{"data-collections": []}', None, '{"type": "incremental"}'):
        with pytest.raises(InvalidSignal, match="names no data-collections"):
            parse_signal(row("execute-snapshot", data))


@pytest.mark.parametrize("t", ['"full"', '"initial"', "5", "null", '["blocking"]'])
def test_bad_snapshot_type(t):
    with pytest.raises(InvalidSignal, match="must be 'incremental' or 'blocking'"):
        parse_signal(row("execute-snapshot", f'{{"data-collections": ["d.t"], "type": {t}}}'))


@pytest.mark.parametrize(
    "conds",
    [
        '{"data-collection": "d.t", "filter": "id > 1"}',  # an object, not a list
        '"id > 1"',
        "5",
    ],
)
def test_additional_conditions_must_be_a_list(conds):
    with pytest.raises(InvalidSignal, match="additional-conditions must be a list"):
        parse_signal(
            row("execute-snapshot", f'{{"data-collections": ["d.t"], "additional-conditions": {conds}}}')
        )


@pytest.mark.parametrize(
    "entry",
    [
        '"id > 1"',
        '{"data-collection": "d.t"}',
        '{"filter": "id > 1"}',
        '{"data-collection": "d.t", "filter": 5}',
        '{"data-collection": ["d.t"], "filter": "id > 1"}',
        '{"data-collection": "d.t", "filter": null}',
        "null",
    ],
)
def test_bad_additional_conditions_entry(entry):
    with pytest.raises(InvalidSignal, match="bad additional-conditions entry"):
        parse_signal(
            row("execute-snapshot", f'{{"data-collections": ["d.t"], "additional-conditions": [{entry}]}}')
        )


def test_invalid_signal_is_not_a_crash_class():
    """Callers catch InvalidSignal to log and skip; UnsafeFilter is one."""
    assert issubclass(UnsafeFilter, InvalidSignal)


def test_signal_table_sql():
    assert signal_table_sql("inv.debezium_signal") == (
        "CREATE TABLE IF NOT EXISTS `inv`.`debezium_signal` (id VARCHAR(42) PRIMARY KEY, "
        "type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
    )
    with pytest.raises(ValueError, match="database.table"):
        signal_table_sql("debezium_signal")


# -- validate_filter -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "rendered"),
    [
        ("id > 5", "id > 5"),
        ("id >= 5 AND id < 100", "id >= 5 AND id < 100"),
        ("name = 'a' OR qty IS NULL", "name = 'a' OR qty IS NULL"),
        ("qty IS NOT NULL", "NOT qty IS NULL"),
        ("id IN (1, 2, 3)", "id IN (1, 2, 3)"),
        ("id NOT IN (1, 2)", "NOT id IN (1, 2)"),
        ("qty BETWEEN 1 AND 10", "qty BETWEEN 1 AND 10"),
        ("name LIKE 'ab%'", "name LIKE 'ab%'"),
        ("NOT (id < 3)", "NOT (id < 3)"),
        ("id % 2 = 0", "id % 2 = 0"),
        ("qty * 2 + 1 > id - 3", "qty * 2 + 1 > id - 3"),
        ("`id` > 3", "`id` > 3"),
        ("ID > 3", "ID > 3"),  # column names are case-insensitive in MySQL
        ("name <> 'it''s'", "name <> 'it''s'"),
        ("created >= '2024-01-01 00:00:00'", "created >= '2024-01-01 00:00:00'"),
        ("CAST(name AS SIGNED) > 3", "CAST(name AS SIGNED) > 3"),
        ("id <=> NULL", "id <=> NULL"),
        ("id = -1", "id = -1"),
        ("TRUE", "TRUE"),
    ],
)
def test_simple_predicates_accepted(sql, rendered):
    assert validate_filter(sql, COLUMNS) == rendered


def test_backslash_escaped_quote_stays_inside_the_literal():
    """MySQL's ``\\'`` escape: the whole thing is one string literal, re-rendered with ``''``."""
    out = validate_filter(r"name = 'a\' OR sleep(1) OR \''", COLUMNS)
    assert out == "name = 'a'' OR sleep(1) OR '''"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("1=1; DROP TABLE x", "must be a single expression, found 2 statements"),
        ("id > 1; DELETE FROM t", "must be a single expression, found 2 statements"),
        ("id IN (SELECT id FROM t)", "contains a subquery"),
        ("id > (SELECT MAX(id) FROM t)", "contains a subquery"),
        ("EXISTS (SELECT 1 FROM t)", "uses EXISTS"),
        ("id > 1 -- comment", "contains a comment; comments are not allowed"),
        ("id > 1 /* hidden */", "contains a comment; comments are not allowed"),
        ("id > 1 # comment", "contains a comment; comments are not allowed"),
        ("id > 1 /*! OR 1=1 */", "contains a comment; comments are not allowed"),
        ("id > 1 /*!50000 OR 1=1 */", "contains a comment; comments are not allowed"),
        ("sleep(5)", "is not a boolean predicate"),
        ("id > sleep(5)", "calls function SLEEP(5), which is not allowed in a filter"),
        ("id = 1 AND benchmark(1000000, md5('x'))", "which is not allowed"),
        ("name = load_file('/etc/passwd')", "which is not allowed"),
        ("name = USER()", "which is not allowed"),
        ("id = IF(1, 1, 0)", "which is not allowed"),
        ("id IN (1, sleep(1))", "which is not allowed"),
        ("nope > 1", "unknown column 'nope' (columns: id, name, qty, created)"),
        ("t.id > 1", "qualified column t.id is not allowed; use bare column names"),
        ("db.t.id > 1", "qualified column db.t.id is not allowed"),
        ("id > 1 UNION SELECT 1", "is not a boolean expression"),
        ("SELECT 1", "is not a boolean expression"),
        ("DROP TABLE x", "is not a boolean expression"),
        ("id + 1", "is not a boolean predicate"),
        ("'abc'", "is not a boolean predicate"),
        ("id", "is not a boolean predicate"),
        ("1", "is not a boolean predicate"),
        ("", "must be a single expression, found 0 statements"),
        ("id > 1) OR (1=1", "is not valid SQL"),
        ("id = @x", "uses variable or parameter @x"),
        ("id = @@version", "uses variable or parameter @@version"),
        ("id > ?", "uses variable or parameter ?"),
        ("name = 0x41", "uses the hex literal"),
        ("name = _utf8'x'", "uses the character set introducer"),
        ("id = CASE WHEN 1 THEN 1 END", "uses a CASE expression"),
        ("id IN ()", "empty IN list"),
    ],
)
def test_injection_and_non_predicates_rejected(sql, message):
    with pytest.raises(UnsafeFilter) as e:
        validate_filter(sql, COLUMNS)
    assert message in str(e.value)
    assert str(e.value).startswith(f"Filter {sql!r}"), "the message quotes the rejected filter"
    named = re.findall(
        r"\b(Anonymous|Func|Exists|Parameter|SessionParameter|Placeholder|HexString|Introducer|Case)\b",
        str(e.value),
    )
    assert not named, f"sqlglot class names in the message: {named}"


# -- matches_collection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("inv.customers", "inv.customers", True),
        ("INV.Customers", "inv.customers", True),
        ("inv.customers", "inv.customers2", False),
        ("inv.cust", "inv.customers", False),  # full match, not a prefix
        ("inv\\.cust.*", "inv.customers", True),
        ("inv\\..*", "inv.orders", True),
        ("inv\\..*", "other.orders", False),
        (".*\\.orders", "a.orders", True),
        ("inv\\.(a|b)", "inv.b", True),
        ("inv\\.(a|b)", "inv.c", False),
        ("inv.[", "inv.customers", False),  # invalid regex: no match, no crash
        ("inv.(customers", "inv.(customers", True),  # ... but the literal name still matches
    ],
)
def test_matches_collection(pattern, name, expected):
    assert matches_collection(pattern, name) is expected


# -- keys ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        [1],
        [-(2**63), 2**64 - 1],
        ["abc", "ünïcødé ✓", ""],
        [Decimal("12345678901234567890.123456789"), Decimal("-0.001")],
        [dt.datetime(2024, 2, 29, 23, 59, 59, 123456), dt.datetime(1970, 1, 1)],
        [dt.date(2024, 2, 29), dt.date(1, 1, 1)],
        [b"\x00\xffbin", bytearray(b"ba")],
        [dt.timedelta(hours=-838, minutes=-59), dt.timedelta(seconds=1.5)],
        [None, True, 1.5],
        [7, "k", Decimal("1.10"), dt.datetime(2020, 1, 2, 3, 4, 5), dt.date(2020, 1, 2), b"\x01"],
    ],
)
def test_encode_decode_key_round_trip(values):
    encoded = encode_key(values)
    through_json = json.loads(json.dumps(encoded))
    decoded = decode_key(through_json)
    assert decoded == [bytes(v) if isinstance(v, bytearray) else v for v in values]
    assert [type(d) for d in decoded] == [bytes if isinstance(v, bytearray) else type(v) for v in values]


def test_encoded_key_forms():
    assert encode_key(
        [1, "a", Decimal("1.50"), dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4, 5), b"ab"]
    ) == [
        1,
        "a",
        {"dec": "1.50"},
        {"d": "2020-01-02"},
        {"dt": "2020-01-02T03:04:05"},
        {"b64": "YWI="},
    ]


# -- IncrementalState ------------------------------------------------------------------------------


def sample_state() -> IncrementalState:
    return IncrementalState(
        snapshot_id="sig-1",
        tables=[
            TableProgress(
                "d.a",
                filter="id > 1",
                last_key=[10, {"dec": "1.5"}],
                max_key=[99, {"dec": "9"}],
                chunks=2,
                rows=20,
            ),
            TableProgress("d.b"),
        ],
        done=["d.z"],
        paused=True,
        chunk_seq=7,
    )


def test_state_round_trip_through_json():
    st = sample_state()
    d = json.loads(json.dumps(st.to_dict()))
    assert d == {
        "snapshot_id": "sig-1",
        "tables": [
            {
                "table": "d.a",
                "filter": "id > 1",
                "last_key": [10, {"dec": "1.5"}],
                "max_key": [99, {"dec": "9"}],
                "chunks": 2,
                "rows": 20,
            },
            {"table": "d.b", "filter": None, "last_key": None, "max_key": None, "chunks": 0, "rows": 0},
        ],
        "done": ["d.z"],
        "paused": True,
        "chunk_seq": 7,
    }
    assert IncrementalState.from_dict(d) == st
    assert st.active and st.tables[0].key == ("d", "a")


def test_state_from_empty_and_minimal():
    assert IncrementalState.from_dict(None) is None
    assert IncrementalState.from_dict({}) is None
    st = IncrementalState.from_dict({"snapshot_id": "s"})
    assert st == IncrementalState(snapshot_id="s")
    assert not st.active and not st.paused and st.chunk_seq == 0


def test_state_copy_is_deep():
    st = sample_state()
    c = st.copy()
    c.tables[0].last_key.append(1)
    c.tables.pop()
    c.done.append("x")
    assert st == sample_state()


def test_progress_summary():
    p = sample_state().progress()
    assert p == {
        "snapshot_id": "sig-1",
        "paused": True,
        "current_table": "d.a",
        "current_chunks": 2,
        "current_rows": 20,
        "last_key": [10, {"dec": "1.5"}],
        "max_key": [99, {"dec": "9"}],
        "queued": ["d.b"],
        "done": ["d.z"],
        "chunks_planned": 7,
    }
    assert IncrementalState("s").progress()["current_table"] is None


# -- start / stop / pause ----------------------------------------------------------------------------


def schema(table: str, pk: tuple[str, ...] = ("id",), db: str = "d") -> TableSchema:
    cols = tuple(ColumnSchema(n, "int", i + 1, n not in pk) for i, n in enumerate(["id", "qty", "k2"]))
    return TableSchema(db, table, cols, pk)


SCHEMAS = {("d", t): schema(t) for t in ("a", "b", "c")} | {("d", "nopk"): schema("nopk", ())}


def test_start_snapshot_from_nothing():
    st, msgs = start_snapshot(None, "sig-1", [("d", "a"), ("d", "b")], {}, SCHEMAS)
    assert st == IncrementalState("sig-1", tables=[TableProgress("d.a"), TableProgress("d.b")])
    assert msgs == ["incremental snapshot sig-1: queued ['d.a', 'd.b']"]


def test_start_snapshot_with_conditions_by_name_and_regex():
    st, _ = start_snapshot(
        None,
        "sig-1",
        [("d", "a"), ("d", "b"), ("d", "c")],
        {"d.a": "id > 5", "d\\.(b|x)": "qty   BETWEEN 1 AND 2"},
        SCHEMAS,
    )
    assert [(p.table, p.filter) for p in st.tables] == [
        ("d.a", "id > 5"),
        ("d.b", "qty BETWEEN 1 AND 2"),
        ("d.c", None),
    ]


def test_start_snapshot_unsafe_filter_skips_the_whole_signal():
    before = IncrementalState(
        "sig-0", tables=[TableProgress("d.c", last_key=[3], max_key=[9], chunks=1, rows=3)]
    )
    with pytest.raises(UnsafeFilter, match="must be a single expression"):
        start_snapshot(before, "sig-1", [("d", "a"), ("d", "b")], {"d.b": "1=1; DROP TABLE d.b"}, SCHEMAS)
    with pytest.raises(UnsafeFilter, match="unknown column 'nope'"):
        start_snapshot(None, "sig-1", [("d", "a")], {"d.a": "nope = 1"}, SCHEMAS)
    assert before == IncrementalState(
        "sig-0", tables=[TableProgress("d.c", last_key=[3], max_key=[9], chunks=1, rows=3)]
    )


def test_start_snapshot_without_primary_key():
    with pytest.raises(IncrementalSnapshotError, match="d.nopk has no primary key"):
        start_snapshot(None, "sig-1", [("d", "a"), ("d", "nopk")], {}, SCHEMAS)


def test_start_snapshot_queues_behind_a_running_one_and_skips_duplicates():
    running = IncrementalState(
        "sig-0", tables=[TableProgress("d.a", last_key=[3], max_key=[9], chunks=1, rows=3)], chunk_seq=1
    )
    st, msgs = start_snapshot(running, "sig-1", [("d", "a"), ("d", "b")], {}, SCHEMAS)
    assert st.snapshot_id == "sig-0", "the running snapshot keeps its id"
    assert st.tables == [
        TableProgress("d.a", last_key=[3], max_key=[9], chunks=1, rows=3),
        TableProgress("d.b"),
    ]
    assert st.chunk_seq == 1
    assert "d.a is already in the incremental snapshot; not queued again" in msgs
    assert running.tables == [TableProgress("d.a", last_key=[3], max_key=[9], chunks=1, rows=3)], (
        "input not mutated"
    )
    finished = IncrementalState("sig-0", tables=[], done=["d.a"], chunk_seq=4)
    st, _ = start_snapshot(finished, "sig-2", [("d", "a")], {}, SCHEMAS)
    assert st.snapshot_id == "sig-2" and [p.table for p in st.tables] == ["d.a"] and st.chunk_seq == 4


def test_stop_snapshot():
    st = IncrementalState(
        "s", tables=[TableProgress("d.a", chunks=2), TableProgress("d.b"), TableProgress("d.c")], chunk_seq=2
    )
    assert stop_snapshot(None, ["d.a"]) is None
    assert stop_snapshot(st, []) is None, "no data-collections: stop everything"
    one = stop_snapshot(st, ["d.b"])
    assert (
        [p.table for p in one.tables] == ["d.a", "d.c"] and one.tables[0].chunks == 2 and one.chunk_seq == 2
    )
    assert [p.table for p in stop_snapshot(st, ["D.A", "d\\.c"]).tables] == ["d.b"]
    assert stop_snapshot(st, ["d\\..*"]) is None, "all tables stopped: no snapshot left"
    assert stop_snapshot(st, ["other.x"]) == st
    assert [p.table for p in st.tables] == ["d.a", "d.b", "d.c"], "input not mutated"


def test_with_paused():
    st = IncrementalState("s", tables=[TableProgress("d.a", last_key=[5], chunks=1)])
    p = with_paused(st, True)
    assert p.paused and not st.paused
    assert p.tables == st.tables, "progress kept"
    r = with_paused(p, False)
    assert not r.paused and r.tables == st.tables
    assert with_paused(None, True) is None


def test_chunk_ids_are_unique_and_fit_the_signal_table():
    uid = "d139b9b7-7777-4547-917d-e1775ea61d41"  # Debezium's documentation uses UUID signal ids
    for sid in (uid, "x" * 42, "s", ""):
        ids = [chunk_id_for(sid, seq) for seq in (1, 9, 10, 11, 100, 123456789)]
        assert len(set(ids)) == len(ids)
        assert all(len(i) + 2 <= 42 for i in ids), "watermark ids (<chunk>-o / -c) fit VARCHAR(42)"
    assert chunk_id_for(uid, 10) != chunk_id_for(uid, 10), "a reused signal id never meets old watermarks"
    assert chunk_id_for("snap-1", 3).startswith("snap-1-3-")
