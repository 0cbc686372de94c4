"""StorageSettings: pure logic (no S3 request is made)."""

from __future__ import annotations

from dagster_mysql_cdc.sink.storage import StorageSettings


def _s3(key: str) -> StorageSettings:
    return StorageSettings(
        "s3://lake/x", s3_endpoint_url="http://127.0.0.1:1", s3_access_key_id=key, s3_secret_access_key="s"
    )


def test_one_boto3_client_per_endpoint_and_credentials():
    """A follow-on window's create-if-absent write asks for a client each time: it is built once
    (about 10 ms each, 0.2 s the first), per endpoint and credentials."""
    a = _s3("k1").boto3_client()
    assert _s3("k1").boto3_client() is a  # equal settings, another value: the same client
    assert _s3("k2").boto3_client() is not a  # other credentials: their own client
    assert a.meta.endpoint_url == "http://127.0.0.1:1"
