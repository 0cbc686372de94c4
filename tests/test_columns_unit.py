"""Column filters and masks (Debezium column.* properties) as pure logic: the policy, the hashes
(compared with Debezium's own MaskStrings test vectors) and the converter that applies them."""

import hashlib

import pytest

from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.source.columns import (
    ColumnPolicy,
    chars_mask,
    hash_mask,
    java_serialized_string,
    truncate_mask,
)
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
from dagster_mysql_cdc.source.types import TableConverter, TypeOptions

T = TableSchema(
    "db",
    "people",
    (
        ColumnSchema("id", "int", 1, nullable=False),
        ColumnSchema("email", "varchar", 2, length=64, charset="utf8mb4"),
        ColumnSchema("ssn", "char", 3, length=11, charset="utf8mb4"),
        ColumnSchema("notes", "text", 4, charset="utf8mb4"),
        ColumnSchema("secret", "varchar", 5, length=20, charset="utf8mb4"),
        ColumnSchema("age", "int", 6),
    ),
    primary_key=("id",),
)


def test_v1_hash_equals_debeziums_test_vectors():
    # io.debezium.relational.mapping.MaskStringsTest (HashingByteArrayStrategy.V1, SHA-256, salt "salt")
    m = hash_mask("SHA-256", "salt", "v1")
    assert m("hello") == "af5843a0f0e728ab0332c8888b6e1190bfb79e584f0d40538de8f10df6ef29c6"
    assert m("world") == "4588e1f2dcdc7fefc1515d3acd5acb9033478eace68286f383c337b9ff4464a3"
    assert m(None) is None


def test_v2_hash_is_salt_then_utf8_value_and_is_cut_to_the_column_length():
    m = hash_mask("sha-512", "pepper", "v2")
    assert m("héllo") == hashlib.sha512(b"pepper" + "héllo".encode()).hexdigest()
    assert hash_mask("SHA-256", "pepper", "v2", length=10)("x") == hashlib.sha256(b"pepperx").hexdigest()[:10]


def test_java_serialization_of_strings():
    assert java_serialized_string("A") == b"\xac\xed\x00\x05\x74\x00\x01A"
    assert java_serialized_string("\x00") == b"\xac\xed\x00\x05\x74\x00\x02\xc0\x80"  # modified UTF-8
    assert java_serialized_string("😀")[5:7] == b"\x00\x06"  # two 3-byte surrogates
    long = java_serialized_string("x" * 70000)
    assert long[4] == 0x7C and long[5:13] == (70000).to_bytes(8, "big")


def test_mask_and_truncate_follow_debezium():
    assert chars_mask(3)("anything") == "***"
    assert chars_mask(3)(None) == "***"  # MaskingValueConverter ignores the value, NULL included
    assert truncate_mask(4)("abcdef") == "abcd"
    assert truncate_mask(4)("abc") == "abc"
    assert truncate_mask(4)(None) is None


def test_policy_filters_columns_case_insensitively_by_full_match():
    p = ColumnPolicy(exclude_list=(r"DB\.people\.secret",))
    assert p.captured(T).column_names == ["id", "email", "ssn", "notes", "age"]
    assert [c.position for c in p.captured(T).columns] == [1, 2, 3, 4, 5]
    assert ColumnPolicy(exclude_list=(r"db\.people\.sec",)).captured(T) is T  # full match only
    inc = ColumnPolicy(include_list=(r"db\.people\.(id|email)",))
    assert inc.captured(T).column_names == ["id", "email"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"include_list": ("a",), "exclude_list": ("b",)}, "cannot both be set"),
        ({"exclude_list": ("db.people.(",)}, "not a valid regular expression"),
        ({"mask_hash": ((r".*\.email", "SHA-256"),)}, "column_mask_hash_salt is empty"),
        ({"mask_hash": ((r".*\.email", "ROT13"),), "hash_salt": "s"}, "ROT13"),
        ({"mask_with_chars": ((r".*\.ssn", 0),)}, "positive integer"),
        ({"mask_hash": ((r".*\.email", "SHA-256"),), "hash_salt": "s", "hash_version": "v3"}, "v3"),
    ],
)
def test_bad_policies_are_refused_with_the_option_named(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        ColumnPolicy(**kwargs)


def test_policies_that_cannot_apply_to_a_table_are_refused():
    with pytest.raises(ConfigurationError, match=r"Key column\(s\) db.people.id"):
        ColumnPolicy(exclude_list=(r"db\.people\.id",)).captured(T)
    with pytest.raises(ConfigurationError, match="leave no column"):
        ColumnPolicy(include_list=(r"other\..*",)).captured(TableSchema("db", "k", T.columns[1:2]))
    with pytest.raises(ConfigurationError, match="only character columns"):
        ColumnPolicy(mask_with_chars=((r"db\.people\.age", 3),)).mask_for(T, T.column("age"))
    with pytest.raises(ConfigurationError, match="every key would collide"):
        ColumnPolicy(truncate=((r"db\.k\.email", 3),)).mask_for(
            TableSchema("db", "k", T.columns[1:2], primary_key=("email",)), T.column("email")
        )
    both = ColumnPolicy(
        truncate=((r"db\.people\.email", 3),), mask_hash=((r".*email", "MD5"),), hash_salt="s"
    )
    with pytest.raises(ConfigurationError, match="several masking rules"):
        both.mask_for(T, T.column("email"))


def test_salt_is_not_in_repr():
    p = ColumnPolicy(mask_hash=((r".*", "MD5"),), hash_salt="Salty-Secret-42")
    assert "Salty-Secret-42" not in repr(p) + repr(TypeOptions(columns=p)) + str(p.describe())


def test_converter_captures_and_masks_on_every_path():
    policy = ColumnPolicy(
        exclude_list=(r"db\.people\.secret",),
        mask_hash=((r"db\.people\.email", "SHA-256"),),
        hash_salt="s",
        mask_with_chars=((r"db\.people\.ssn", 2),),
        truncate=((r"db\.people\.notes", 3),),
    )
    opts = TypeOptions(columns=policy)
    email = hash_mask("SHA-256", "s", "v1", 64)("a@b.c")
    want = (1, email, "**", "lon", 42)
    raw = (1, "a@b.c", "123-45-6789", "long notes", 42)
    conv = TableConverter(T, opts, "pymysql")
    assert conv.names == ("id", "email", "ssn", "notes", "age")
    assert conv.masked == ("email", "ssn", "notes")
    assert conv.arrow_schema.names == list(conv.names)
    assert conv.convert_row(raw) == want
    assert tuple(conv.to_record_batch([raw]).to_pylist()[0].values()) == want
    assert tuple(c[0] for c in conv.convert_columns([raw])) == want
    binlog = TableConverter(T, opts, "binlog")
    image = {"id": 1, "email": "a@b.c", "ssn": "123-45-6789", "notes": "long notes", "secret": "x", "age": 42}
    assert binlog.convert_row_dict(image) == want
    assert TableConverter(conv.table, opts, "binlog").convert_row_dict(image) == want  # idempotent filter
    assert TableConverter(T, TypeOptions(), "pymysql").names == tuple(T.column_names)


def test_builder_drops_only_the_events_it_cannot_convert_and_says_where():
    """event.processing.failure.handling.mode=warn|skip: the builder's part (pure logic)."""
    from dagster_mysql_cdc.events import ChangeEventBuilder

    t = TableSchema(
        "db",
        "t",
        (ColumnSchema("id", "int", 1, nullable=False), ColumnSchema("d", "datetime", 2)),
        primary_key=("id",),
    )
    conv = TableConverter(t, TypeOptions(), "binlog")
    b = ChangeEventBuilder(conv.arrow_schema, t.primary_key, server_name="s", database="db", table="t")
    common = dict(ts_ms=1, source_ts_ms=1, server_id=1)
    b.add_raw(
        conv,
        "c",
        None,
        [{"id": 1, "d": None}, {"id": 2, "d": {"not": "a date"}}],
        file="b.1",
        pos=4,
        **common,
    )
    b.add_raw(conv, "u", [{"id": 3, "d": None}], [{"id": 3, "d": None}], file="b.1", pos=90, **common)
    with pytest.raises(ValueError, match="column 'd'"):
        b.to_record_batch()
    bad = b.unconvertible_events()
    assert list(bad) == [1] and bad[1].startswith("after.d: ValueError")
    assert b.event_position(1) == "b.1:4 row 1"
    b.drop_events(set(bad))
    rows = b.to_record_batch().to_pylist()
    assert [(r["op"], r["after"]["id"], r["before"] and r["before"]["id"]) for r in rows] == [
        ("c", 1, None),
        ("u", 3, 3),
    ]
    assert [r["source"]["pos"] for r in rows] == [4, 90]
