"""Shared Spark Connect session ids (dagster_mysql_cdc.sink.spark_session): pure logic, no server."""

import datetime as dt
import uuid

from dagster_mysql_cdc.sink.spark_session import SHARED_SESSION_GENERATIONS, shared_session_urls

DAY = dt.date(2026, 11, 24)


def _ids(urls):
    return [u.rsplit("session_id=", 1)[1] for u in urls]


def test_plain_url_gets_stable_session_ids_per_generation():
    urls = list(shared_session_urls("sc://127.0.0.1:15002", DAY))
    assert len(urls) == SHARED_SESSION_GENERATIONS
    assert all(u.startswith("sc://127.0.0.1:15002/;session_id=") for u in urls)
    ids = _ids(urls)
    assert len(set(ids)) == len(ids)  # one id per generation
    assert all(str(uuid.UUID(i)) == i for i in ids)  # the server requires UUIDs
    # another process on the same day derives the same ids (that is what makes the session shared)
    assert ids == _ids(shared_session_urls("sc://127.0.0.1:15002", DAY))


def test_ids_change_with_the_day_and_the_server():
    first = _ids(shared_session_urls("sc://127.0.0.1:15002", DAY))[0]
    assert first != _ids(shared_session_urls("sc://127.0.0.1:15002", DAY + dt.timedelta(days=1)))[0]
    assert first != _ids(shared_session_urls("sc://127.0.0.1:15003", DAY))[0]


def test_parameters_of_the_url_are_kept():
    url = "sc://spark.example:443/;use_ssl=true;token=abc"
    first = next(shared_session_urls(url, DAY))
    assert first.startswith("sc://spark.example:443/;use_ssl=true;token=abc;session_id=")
    trailing = next(shared_session_urls("sc://h:15002/", DAY))
    assert trailing.startswith("sc://h:15002/;session_id=")


def test_an_explicit_session_id_is_used_as_is():
    url = "sc://h:15002/;user_id=me;session_id=2f1e4c1a-0000-4000-8000-000000000001"
    assert list(shared_session_urls(url, DAY)) == [url]
