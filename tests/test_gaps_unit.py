"""Pure logic of the binlog-gap detection and repair planning (no server)."""

import json

import pytest

from dagster_mysql_cdc.dagster_integration.status import CaptureStatus
from dagster_mysql_cdc.engine.gaps import (
    SIGNAL_DATA_LIMIT,
    BinlogGap,
    CascadeTracker,
    check_gap_handling,
    checksum_repair_signal,
    key_ranges_filter,
    queue_repairs,
)
from dagster_mysql_cdc.engine.incremental import IncrementalState, TableProgress
from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.source.foreign_keys import CascadingForeignKey, cascade_conditions, key_in_condition
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
from dagster_mysql_cdc.source.signals import InvalidSignal, parse_signal
from dagster_mysql_cdc.source.statements import (
    UnreadableSignalStatement,
    dml_target_tables,
    is_dml,
    signal_statement_rows,
)


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("INSERT INTO t (a) VALUES (1)", [("d0", "t")]),
        ("insert into `my db`.`t 1` values (1)", [("my db", "t 1")]),
        ("/* hint */ INSERT INTO t VALUES (1)", [("d0", "t")]),
        ("INSERT INTO t SELECT * FROM u", [("d0", "t")]),
        ("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 2", [("d0", "t")]),
        ("REPLACE INTO db.t VALUES (1)", [("db", "t")]),
        ("UPDATE t SET a = 1 WHERE id = 2", [("d0", "t")]),
        ("UPDATE a JOIN b ON a.id = b.id SET a.x = 1", [("d0", "a"), ("d0", "b")]),
        ("UPDATE a, x.b SET a.x = 1, b.y = 2", [("d0", "a"), ("x", "b")]),
        ("DELETE FROM x.t WHERE id = 1", [("x", "t")]),
        ("DELETE a, b FROM a JOIN b ON a.id = b.id", [("d0", "a"), ("d0", "b")]),
        ("DELETE p FROM t AS p JOIN u ON 1", [("d0", "t")]),
        ("LOAD DATA INFILE '/tmp/x' INTO TABLE t", [("d0", "t")]),
        ("LOAD DATA LOCAL INFILE '/tmp/x' REPLACE INTO TABLE z.t", [("z", "t")]),
        ("CREATE TABLE x (a INT)", None),
        ("ALTER TABLE t ADD c INT", None),
        ("BEGIN", None),
        ("TRUNCATE TABLE t", None),  # a DDL for MySQL: the schema history handles it
    ],
)
def test_dml_target_tables(sql, tables):
    assert dml_target_tables(sql, "d0") == tables
    assert is_dml(sql) == (tables is not None)


def test_unqualified_dml_without_default_database_names_no_table():
    assert dml_target_tables("INSERT INTO t VALUES (1)", None) == []


FK = CascadingForeignKey(
    name="fk_child",
    child=("d", "child"),
    child_columns=("parent_id",),
    parent=("d", "parent"),
    parent_columns=("id",),
    on_delete="SET NULL",
    on_update="CASCADE",
)
FK_KEY = CascadingForeignKey(
    name="fk_link",
    child=("d", "link"),
    child_columns=("pa", "pb"),
    parent=("d", "parent2"),
    parent_columns=("a", "b"),
    on_delete="RESTRICT",
    on_update="CASCADE",
)


def test_cascade_tracker_turns_key_changes_into_filtered_repairs():
    tr = CascadeTracker({("d", "parent"): [FK], ("d", "parent2"): [FK_KEY]})
    tr.add(
        ("d", "parent"),
        "u",
        [{"before_values": {"id": 1, "n": "a"}, "after_values": {"id": 7, "n": "a"}}],
        "f:10",
    )
    tr.add(
        ("d", "parent"),
        "u",
        [{"before_values": {"id": 2, "n": "a"}, "after_values": {"id": 2, "n": "b"}}],
        "f:20",
    )
    tr.add(("d", "parent"), "d", [{"values": {"id": 3, "n": "x"}}], "f:30")
    tr.add(("d", "parent2"), "d", [{"values": {"a": 1, "b": "x"}}], "f:40")  # RESTRICT: nothing
    tr.add(
        ("d", "parent2"),
        "u",
        [{"before_values": {"a": 1, "b": "x"}, "after_values": {"a": 1, "b": "y"}}],
        "f:50",
    )
    gaps = {(g.table, g.position): g for g in tr.gaps()}
    assert set(gaps) == {("d.child", "f:10"), ("d.child", "f:30"), ("d.link", "f:50")}
    assert gaps[("d.child", "f:10")].filter == "`parent_id` IN (1, 7)"
    assert gaps[("d.child", "f:10")].key_map == {"columns": ["parent_id"], "pairs": [[[1], [7]]]}
    assert gaps[("d.child", "f:30")].filter == "`parent_id` IN (3) OR `parent_id` IS NULL"
    assert gaps[("d.child", "f:30")].key_map is None
    assert "ON DELETE SET NULL" in gaps[("d.child", "f:30")].detail
    assert gaps[("d.link", "f:50")].filter == "(`pa`, `pb`) IN ((1, 'x'), (1, 'y'))"


def test_cascade_without_column_names_repairs_the_whole_child_table():
    tr = CascadeTracker({("d", "parent"): [FK]})
    tr.add(("d", "parent"), "d", [{"values": {"UNKNOWN_COL0": 3}}], "f:1")
    (g,) = tr.gaps()
    assert g.filter is None


def test_unsafe_values_give_no_filter():
    assert key_in_condition(["k"], [(b"\x00\x01",)]) is None
    assert cascade_conditions(FK, "CASCADE", [(None,)]) is None
    assert key_in_condition(["k"], [("a'b",)]) == "`k` IN ('a''b')"


def _schema(table, cols, pk):
    return TableSchema(
        database="d",
        table=table,
        columns=tuple(ColumnSchema(name=c, data_type="int", position=i + 1) for i, c in enumerate(cols)),
        primary_key=tuple(pk),
    )


def test_queue_repairs_queues_once_and_explains_what_it_cannot_repair():
    schemas = {
        ("d", "child"): _schema("child", ["id", "parent_id"], ["id"]),
        ("d", "keyless"): _schema("keyless", ["a"], []),
    }
    gaps = [
        BinlogGap(
            "fk_cascade",
            "d.child",
            "f:1",
            "x",
            filter="`parent_id` IN (1, 7)",
            key_map={"columns": ["parent_id"], "pairs": []},
        ),
        BinlogGap("fk_cascade", "d.child", "f:2", "x", filter="`parent_id` IN (1, 7)"),
        BinlogGap("statement_dml", "d.keyless", "f:3", "x"),
        BinlogGap("statement_dml", "d.gone", "f:4", "x"),
        BinlogGap("statement_dml", "d.child", "f:5", "x", filter="SLEEP(1) = 0"),
    ]
    state = queue_repairs(None, gaps, schemas, "repair-1")
    assert state is not None and state.snapshot_id == "repair-1"
    # key_map only when its columns are in the key; an unsafe filter falls back to the whole
    # table, which covers the filtered repair queued before it: the table is re-read once
    # (issue 25 point 4: whole and filtered repairs of one table deleted the same keys twice)
    assert [(p.table, p.filter, p.key_map) for p in state.tables] == [("d.child", None, None)]
    assert state.tables[0].reason.startswith("statement_dml at f:5")
    assert "fk_cascade at f:1" in state.tables[0].reason
    assert gaps[0].repair.startswith("Repair queued: incremental snapshot repair-1 of rows where")
    assert gaps[1].repair == gaps[0].repair
    assert gaps[4].repair.endswith("of the whole table")
    assert "need a primary key" in gaps[2].repair
    assert "not in the schema catalog" in gaps[3].repair
    # an existing snapshot keeps its id; repairs are appended
    st2 = queue_repairs(IncrementalState("sig-9", [TableProgress("d.other")]), gaps[:1], schemas, "repair-2")
    assert st2.snapshot_id == "sig-9" and [p.table for p in st2.tables] == ["d.other", "d.child"]


def test_repairs_of_one_table_are_merged_before_they_start():
    """Issue 25 point 4: two repairs of one table queued before it is read became two chunk series
    that each deleted the same absent lake rows; now they are one (filters OR-ed, candidate keys
    and key maps joined); a repair already reading is left alone."""
    schemas = {("d", "c"): _schema("c", ["id", "a", "b"], ["id"])}
    gaps = [
        BinlogGap("fk_cascade", "d.c", "f:1", "x", filter="`a` IN (1)"),
        BinlogGap("fk_cascade", "d.c", "f:2", "y", filter="`b` IN (2)"),
    ]
    gaps[1].candidate_keys = [[5]]
    state = queue_repairs(None, gaps, schemas, "r-1")
    assert [(p.table, p.filter, p.candidate_keys) for p in state.tables] == [
        ("d.c", "(`a` IN (1)) OR (`b` IN (2))", [[5]])
    ]
    assert gaps[1].repair.endswith("of rows where (`a` IN (1)) OR (`b` IN (2))")
    state.tables[0].last_key = [10]  # started: a later repair is queued after it
    later = queue_repairs(
        state, [BinlogGap("fk_cascade", "d.c", "f:3", "z", filter="`a` IN (3)")], schemas, "r-2"
    )
    assert [p.filter for p in later.tables] == ["(`a` IN (1)) OR (`b` IN (2))", "`a` IN (3)"]


def test_state_with_repair_fields_round_trips_and_stays_compact_without():
    st = IncrementalState(
        "r",
        [
            TableProgress(
                "d.t",
                filter="`a` IN (1)",
                reason="why",
                key_map={"columns": ["a"], "pairs": [[[1], [2]]]},
                candidate_keys=[[5]],
            ),
            TableProgress("d.u"),
        ],
    )
    again = IncrementalState.from_dict(json.loads(json.dumps(st.to_dict())))
    assert again == st
    assert "reason" not in st.to_dict()["tables"][1]


def test_gap_handling_modes():
    assert check_gap_handling("warn") == "warn"
    with pytest.raises(ConfigurationError, match="binlog_gap_handling='fix' is not valid; use one of"):
        check_gap_handling("fix")


def test_key_ranges_and_checksum_signal():
    assert (
        key_ranges_filter(["id"], [(1,), (3,), (2,)])
        == "(`id` BETWEEN 1 AND 1) OR (`id` BETWEEN 2 AND 2) OR (`id` BETWEEN 3 AND 3)"
    )
    assert (
        key_ranges_filter(["id"], [(i,) for i in range(100)], max_ranges=2)
        == "(`id` BETWEEN 0 AND 49) OR (`id` BETWEEN 50 AND 99)"
    )
    assert key_ranges_filter(["id"], []) is None
    assert key_ranges_filter(["id"], [(b"x",)]) is None
    sid, data = checksum_repair_signal("d.t", ["id"], [(5,), (9,)], [(9,)], "checksum_mismatch at f:1")
    assert sid.startswith("repair-") and len(sid) <= 42
    sig = parse_signal({"id": sid, "type": "execute-snapshot", "data": data})
    assert sig.conditions == {"d.t": "(`id` BETWEEN 5 AND 5) OR (`id` BETWEEN 9 AND 9)"}
    assert sig.reason == "checksum_mismatch at f:1" and sig.delete_keys == ((9,),)
    # too many keys for the signal's data column: ranges are kept, delete keys dropped
    _, big = checksum_repair_signal(
        "d.t", ["id"], [(i,) for i in range(5000)], [(i,) for i in range(5000)], "r"
    )
    assert len(big) <= SIGNAL_DATA_LIMIT and "delete-keys" not in big and "additional-conditions" in big


def test_checksum_repair_of_a_null_key_rereads_the_whole_table():
    """Issue 25 point 2: a lake row with a NULL key (decoded from a MINIMAL row image) made the
    checksum repair's advice crash (``'<' not supported between 'int' and 'NoneType'``)."""
    assert key_ranges_filter(["id"], [(3,), (None,), (1,)]) is None
    sid, data = checksum_repair_signal("d.t", ["id"], [(3,), (None,)], [(None,)], "checksum_mismatch at f:1")
    sig = parse_signal({"id": sid, "type": "execute-snapshot", "data": data})
    assert sig.conditions == {} and sig.delete_keys == ()  # the whole table, no NULL key to delete


def test_repair_signal_fields_are_validated():
    with pytest.raises(InvalidSignal, match="delete-keys must be a list of key value lists"):
        parse_signal(
            {
                "id": "x",
                "type": "execute-snapshot",
                "data": '{"data-collections": ["d.t"], "delete-keys": [1]}',
            }
        )
    with pytest.raises(InvalidSignal, match="reason must be a string"):
        parse_signal(
            {"id": "x", "type": "execute-snapshot", "data": '{"data-collections": ["d.t"], "reason": 3}'}
        )


def test_status_lines():
    """Issue 25 point 9: one short line per concern (a repair's line was 2,610 characters)."""
    from dagster_mysql_cdc.dagster_integration.health import CaptureHealth, SensorHealth

    st = CaptureStatus(
        sensor="s",
        committed="mysql-bin.000002:400",
        server="db:3306",
        server_position="mysql-bin.000002:900",
        lag_bytes=500,
        lag_seconds=2.25,
        inflight={"kind": "stream", "window": "a -> b", "attempt": 2, "run_id": "r", "run_status": "STARTED"},
        incremental={
            "snapshot_id": "repair-1",
            "current_table": "d.t",
            "current_chunks": 3,
            "current_rows": 3000,
            "key_progress": "3000 of 9000 (33 %)",
            "queued": ["d.u"],
            "paused": False,
            "repairs": ["statement_dml at f:1: " + "x" * 3000, "fk_cascade at f:2"],
        },
        last_error="run x FAILURE: SinkError: lake not writable",
        health=CaptureHealth(
            sensor=SensorHealth("RUNNING", 5, 400.0, False, "SKIPPED", None, 0, 390.0),
            last_run_failure={
                "run_id": "x" * 36,
                "status": "FAILURE",
                "age_seconds": 12.0,
                "reason": "SinkError: lake not writable",
            },
            retry_in_seconds=20.0,
            stopped={
                "d.s": {
                    "since": {"file": "mysql-bin.000002", "pos": 120},
                    "error": "SinkError: the table's state cannot be read\n" + "trace " * 500,
                    "attempts": 2,
                    "retry_at": 0.0,
                    "stopped_at": 1.0,
                }
            },
        ),
    )
    lines = st.lines()
    assert lines[0] == "s: committed mysql-bin.000002:400 | lag 500 bytes, 2.2 s (server db:3306)"
    assert lines[1].startswith(
        "sensor: NOT TICKING, last tick 400 s ago (interval 5 s); the daemon's SENSOR heartbeat is 390 s old"
    )
    assert lines[2] == "last tick error: none"
    assert lines[3] == "last run failure: run xxxxxxxx FAILURE 12 s ago: SinkError: lake not writable"
    assert lines[4] == "retry: the failed window is retried in 20 s (exponential backoff)"
    assert lines[5].startswith(
        "table STOPPED: d.s is not captured from mysql-bin.000002:120 on (2 failed attempt(s)): "
        "SinkError: the table's state cannot be read; caught up with the next window, or at once after "
        "it is materialized"
    )
    del lines[5]
    assert lines[5] == "failing checks: none"
    assert lines[6] == "in flight: stream a -> b attempt 2 (STARTED)"
    assert lines[7].startswith(
        "repair repair-1: d.t chunk 3, 3000 rows, key 3000 of 9000 (33 %), 1 queued; why: statement_dml at f:1"
    )
    assert lines[7].endswith("(+1 more)") and all(len(line) <= 400 for line in lines)
    bare = CaptureStatus("s", None).lines()
    assert bare == [
        "s: committed nothing (no snapshot yet) | lag not computed (--no-server)",
        "in flight: none",
        "repairs / incremental snapshot: none",
    ]


def test_gap_handling_fail_warn_and_no_signal_table():
    from dagster_mysql_cdc.engine.gaps import BinlogGapError
    from dagster_mysql_cdc.engine.incremental_source import IncrementalOptions
    from dagster_mysql_cdc.engine.stream import StreamOptions
    from dagster_mysql_cdc.engine.window_gaps import handle_gaps
    from dagster_mysql_cdc.events import BinlogPosition

    schemas = {("d", "t"): _schema("t", ["id"], ["id"])}
    start = BinlogPosition("mysql-bin.000001", 4)

    def gaps():
        return [BinlogGap("statement_dml", "d.t", "mysql-bin.000001:99", "INSERT ...")]

    with pytest.raises(BinlogGapError, match=r"statement_dml on d\.t at mysql-bin\.000001:99") as e:
        handle_gaps(
            gaps(), None, StreamOptions(gap_handling="fail"), IncrementalOptions("d.sig"), schemas, start
        )
    assert "binlog_gap_handling='repair'" in str(e.value)
    g = gaps()
    assert (
        handle_gaps(g, None, StreamOptions(gap_handling="warn"), IncrementalOptions("d.sig"), schemas, start)
        is None
    )
    assert g[0].repair.startswith("Not repaired (binlog_gap_handling='warn')")
    g = gaps()
    assert handle_gaps(g, None, StreamOptions(), IncrementalOptions(None), schemas, start) is None
    assert "need the signal table" in g[0].repair
    g = gaps()
    st = handle_gaps(g, None, StreamOptions(), IncrementalOptions("d.sig"), schemas, start)
    assert st is not None and [(p.table, p.filter) for p in st.tables] == [("d.t", None)]
    assert st.snapshot_id == f"repair-{start.as_version()}"


def test_signal_rows_are_read_from_statement_based_writes():
    """Issue 25 point 1: with binlog_format=STATEMENT the watermark rows and signals are QUERY
    events; their rows are read from the literal statement text (as pymysql sends them)."""
    from pymysql.converters import escape_string

    sig = ("db", "debezium_signal")
    data = '{"data-collections": ["db.t"], "note": "it\'s"}'
    sql = f"INSERT INTO `db`.`debezium_signal` (id, type, data) VALUES ('s1', 'execute-snapshot', '{escape_string(data)}')"
    assert signal_statement_rows(sql, None, sig) == (
        "c",
        [{"values": {"id": "s1", "type": "execute-snapshot", "data": data}}],
    )
    assert signal_statement_rows(
        "insert into debezium_signal values ('w-o', 'snapshot-window-open', 'w'), ('x', 'log', NULL)",
        "db",
        sig,
    ) == (
        "c",
        [
            {"values": {"id": "w-o", "type": "snapshot-window-open", "data": "w"}},
            {"values": {"id": "x", "type": "log", "data": None}},
        ],
    )
    assert signal_statement_rows("DELETE FROM `db`.`debezium_signal` WHERE id = 'w-o'", None, sig) == (
        "d",
        [{"values": {"id": "w-o"}}],
    )
    assert signal_statement_rows("INSERT INTO db.t VALUES (1)", None, sig) is None
    for bad in (
        "INSERT INTO db.debezium_signal SELECT * FROM db.other",
        "INSERT INTO db.debezium_signal VALUES (UUID(), 'log', NULL)",
        "UPDATE db.debezium_signal SET data = NULL",
        "DELETE FROM db.debezium_signal WHERE type = 'log'",
    ):
        with pytest.raises(UnreadableSignalStatement):
            signal_statement_rows(bad, None, sig)


def test_trigger_bodies_name_the_tables_they_write():
    """Issue 25 point 3: Sakila's film triggers write film_text (the bodies as
    information_schema.TRIGGERS.ACTION_STATEMENT shows them)."""
    from dagster_mysql_cdc.source.triggers import trigger_written_tables

    ins = (
        "BEGIN\n    INSERT INTO film_text (film_id, title, description)\n"
        "        VALUES (new.film_id, new.title, new.description);\n  END"
    )
    upd = (
        "BEGIN\n    IF (old.title != new.title) OR (old.film_id != new.film_id)\n    THEN\n"
        "        UPDATE film_text SET title=new.title, film_id=new.film_id WHERE film_id=old.film_id;\n"
        "    END IF;\n  END"
    )
    assert trigger_written_tables(ins, "sakila") == [("sakila", "film_text")]
    assert trigger_written_tables(upd, "sakila") == [("sakila", "film_text")]
    assert trigger_written_tables("BEGIN DELETE FROM other.log WHERE id = old.id; END", "d") == [
        ("other", "log")
    ]
    assert trigger_written_tables("SET NEW.last_update = NOW()", "d") == []


def test_trigger_events_of_statements_and_trigger_bodies():
    """Which triggers a statement fires: the issue's UPDATE of Sakila's film fires upd_film, not
    del_film (the gap named del_film, the first of film's triggers by name)."""
    from dagster_mysql_cdc.source.statements import trigger_events
    from dagster_mysql_cdc.source.triggers import trigger_writes

    assert trigger_events("UPDATE film SET title = 'x'") == ("UPDATE",)
    assert trigger_events("update a join b on a.id = b.id set a.x = 1") == ("UPDATE",)
    assert trigger_events("DELETE FROM film WHERE film_id = 1") == ("DELETE",)
    assert trigger_events("INSERT INTO t VALUES (1)") == ("INSERT",)
    assert trigger_events("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 2") == ("INSERT", "UPDATE")
    assert trigger_events("REPLACE INTO t VALUES (1)") == ("INSERT", "DELETE")
    assert trigger_events("LOAD DATA INFILE 'f' INTO TABLE t") == ("INSERT",)
    assert trigger_events("LOAD DATA INFILE 'f' REPLACE INTO TABLE t") == ("INSERT", "DELETE")
    body = (
        "BEGIN IF new.x THEN UPDATE log SET n = n + 1 WHERE id = 1; END IF; "
        "INSERT INTO other.audit VALUES (new.id); DELETE FROM log WHERE id = old.id; END"
    )
    assert trigger_writes(body, "d") == [
        (("d", "log"), ("UPDATE", "DELETE")),
        (("other", "audit"), ("INSERT",)),
    ]


def test_foreign_keys_are_read_from_show_create_table():
    """Issue 'Nothing lost' point 6: MariaDB 10.11 shows information_schema.REFERENTIAL_CONSTRAINTS
    only to users with a privilege other than SELECT, so a least-privilege capture user found no
    cascading key; SHOW CREATE TABLE shows them to it, and is parsed with sqlglot."""
    from dagster_mysql_cdc.source.foreign_keys import UnreadableForeignKey, foreign_keys_in_create

    create = (
        "CREATE TABLE `film_actor` (\n"
        "  `actor_id` smallint(5) unsigned NOT NULL DEFAULT 1 COMMENT 'a, b (FOREIGN KEY)',\n"
        "  `x,y` int(11) DEFAULT NULL,\n"
        "  `last_update` timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),\n"
        "  PRIMARY KEY (`actor_id`,`x,y`),\n"
        "  KEY `idx_fk_film_id` (`x,y`),\n"
        "  CONSTRAINT `fk_film_actor_actor` FOREIGN KEY (`actor_id`) REFERENCES `actor` (`actor_id`) ON UPDATE CASCADE,\n"
        "  CONSTRAINT `fk``2` FOREIGN KEY (`actor_id`, `x,y`) REFERENCES `other db`.`p` (`a`, `b`) "
        "ON DELETE SET NULL ON UPDATE NO ACTION,\n"
        "  CONSTRAINT `fk_plain` FOREIGN KEY (`x,y`) REFERENCES `q` (`id`),\n"
        "  CONSTRAINT `CONSTRAINT_1` CHECK (`x,y` > 0)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 WITH SYSTEM VERSIONING"
    )
    fks = foreign_keys_in_create(create, "sakila", "film_actor")
    assert [(f.name, f.child_columns, f.parent, f.parent_columns, f.on_delete, f.on_update) for f in fks] == [
        ("fk_film_actor_actor", ("actor_id",), ("sakila", "actor"), ("actor_id",), "RESTRICT", "CASCADE"),
        ("fk`2", ("actor_id", "x,y"), ("other db", "p"), ("a", "b"), "SET NULL", "NO ACTION"),
        ("fk_plain", ("x,y",), ("sakila", "q"), ("id",), "RESTRICT", "RESTRICT"),
    ]
    assert {f.child for f in fks} == {("sakila", "film_actor")}
    assert [f.acts_on("u") for f in fks] == ["CASCADE", None, None]
    assert [f.acts_on("d") for f in fks] == [None, "SET NULL", None]
    assert foreign_keys_in_create("CREATE TABLE t (id INT PRIMARY KEY)", "d", "t") == []
    with pytest.raises(UnreadableForeignKey, match="d.t"):
        foreign_keys_in_create("CREATE TABLE t (id INT, FOREIGN KEY (id) REFERENCES)", "d", "t")


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (
            "GRANT SELECT, TRIGGER ON `sakila`.* TO `cdc`@`%`",
            ("GRANT", {"SELECT", "TRIGGER"}, "sakila", None),
        ),
        (
            "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` IDENTIFIED BY PASSWORD '*83'",
            ("GRANT", {"REPLICATION SLAVE", "BINLOG MONITOR"}, "*", None),
        ),
        (
            "GRANT INSERT ON `db`.`debezium_signal` TO 'cdc'@'%'",
            ("GRANT", {"INSERT"}, "db", "debezium_signal"),
        ),
        ("GRANT ALL PRIVILEGES ON `a\\_b`.* TO `r`", ("GRANT", {"ALL PRIVILEGES"}, "a\\_b", None)),
        ("GRANT SELECT (`on`, `x`), UPDATE (`x`), DELETE ON `d`.`t` TO u", ("GRANT", {"DELETE"}, "d", "t")),
        ("REVOKE TRIGGER ON `d`.* FROM `cdc`@`%`", ("REVOKE", {"TRIGGER"}, "d", None)),
        ("GRANT `trg_role` TO `cdc`@`%`", None),
        ("GRANT EXECUTE ON PROCEDURE `d`.`p` TO `cdc`@`%`", None),
        ("GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION", None),
    ],
)
def test_show_grants_lines_are_parsed(line, parsed):
    from dagster_mysql_cdc.source.triggers import parse_grant

    got = parse_grant(line)
    assert (got if got is None else (got[0], set(got[1]), got[2], got[3])) == parsed


def test_trigger_visibility_follows_the_grants():
    """What information_schema.TRIGGERS shows (measured on MariaDB 10.11): bodies with TRIGGER,
    names with INSERT/UPDATE/DELETE (MariaDB only), nothing with SELECT only."""
    from dagster_mysql_cdc.source.triggers import HIDDEN, NAMES_ONLY, WITH_BODIES, TriggerVisibility

    sel, trg, ins = frozenset({"SELECT"}), frozenset({"TRIGGER"}), frozenset({"INSERT"})
    v = TriggerVisibility(
        "'cdc'@'%'",
        grants=(
            (sel, "sakila", None),
            (ins, "sakila", "debezium_signal"),
            (trg, "app", None),
            (trg, "one", "t"),
            (frozenset({"ALL PRIVILEGES"}), "wild\\_%", None),
        ),
        revokes=((trg, "app"),),
    )
    assert v.of("sakila", "film") == HIDDEN  # the least-privilege grants
    assert v.of("sakila", "debezium_signal") == NAMES_ONLY
    assert v.of("app", "t") == HIDDEN  # partially revoked
    assert (v.of("one", "t"), v.of("one", "u")) == (WITH_BODIES, HIDDEN)
    assert (v.of("wild_1", "t"), v.of("wildx1", "t")) == (WITH_BODIES, HIDDEN)
    mysql = TriggerVisibility("u", grants=((ins, "*", None),), is_mariadb=False)
    assert mysql.of("d", "t") == HIDDEN


def test_updated_columns_of_statements():
    """A statement-based UPDATE cascades only when it assigns a referenced column (Sakila: a
    title change of film does not touch film_actor); unreadable: any column."""
    from dagster_mysql_cdc.source.statements import updated_columns

    assert updated_columns("UPDATE film SET title = CONCAT(title, '!') WHERE film_id <= 4") == {"title"}
    assert updated_columns("update a join b on a.id = b.id set a.X = 1, b.y = 2") == {"x", "y"}
    assert updated_columns("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE id = 2") == {"id"}
    assert updated_columns("INSERT INTO t VALUES (1)") == frozenset()
    assert updated_columns("DELETE FROM t") == frozenset()
    assert updated_columns("UPDATE t SET (a) = 1") is None


def test_queued_and_completed_repairs_of_a_state():
    """What the checks read from the incremental snapshot state after a run: the repairs still to
    read (a plain incremental snapshot is none; a checksum's repair is a divergence, a DDL's
    the capture's own), and the tables whose repair the run's chunks completed."""
    from dagster_mysql_cdc.engine.gaps import completed_repairs, queued_repairs

    state = IncrementalState(
        "r-1",
        [
            TableProgress("d.a", reason="ddl at f:1: values of existing rows changed", chunks=2),
            TableProgress(
                "d.b", filter="`id` BETWEEN 3 AND 5", reason="checksum_mismatch at f:2: 1 differing key(s)"
            ),
            TableProgress("d.plain"),
        ],
    )
    q = queued_repairs(state.to_dict())
    assert sorted(q) == ["d.a", "d.b"]
    assert not q["d.a"].divergence and q["d.a"].started and q["d.a"].what == "the whole table"
    assert q["d.b"].divergence and not q["d.b"].started
    assert q["d.b"].describe() == (
        "repair r-1 of d.b (rows where `id` BETWEEN 3 AND 5) queued: checksum_mismatch at f:2: 1 differing key(s)"
    )
    assert queued_repairs(None) == {}
    chunks = [
        {"table": "d.a", "repair": "ddl at f:1"},  # still in the state: not complete
        {"table": "d.c", "repair": "statement_dml at f:0"},  # gone from the state: complete
        {"table": "d.plain"},  # not a repair
    ]
    assert completed_repairs(chunks, state) == {"d.c"}
    assert completed_repairs(chunks, None) == {"d.a", "d.c"}
    assert completed_repairs(None, state) == set()
