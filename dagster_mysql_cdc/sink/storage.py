"""Where the lake lives: the local filesystem (default) or any S3 API endpoint.

One :class:`StorageSettings` value describes the location and credentials and derives what each
library needs from it: Delta ``storage_options`` for deltalake (delta-rs) commits, a pyarrow
filesystem for the Parquet files Spark executors write, and a boto3 client for small objects.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ..errors import ConfigurationError, LakeUnavailableError

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class StorageSettings:
    """Lake location and object-store credentials.

    Attributes:
        base_uri: root of the lake. A local path or ``file://`` URI (default ``./.lake``), or
            ``s3://bucket/prefix`` for an S3 API endpoint.
        s3_endpoint_url: S3 API endpoint, e.g. ``http://127.0.0.1:8333`` (SeaweedFS) or
            ``https://s3.eu-west-1.amazonaws.com``; ``None`` for AWS defaults.
        s3_access_key_id / s3_secret_access_key: credentials (``None``: the AWS default chain,
            i.e. environment variables / instance profile). Hidden from ``repr``.
        s3_region: region name sent with requests.
        s3_conditional_put: ``etag`` makes Delta commits atomic with conditional PUT
            (``If-None-Match: *``) on stores that enforce it (AWS S3 since 2024, SeaweedFS, MinIO).
            ``None`` disables it; then only one writer per table may run at a time.

    Raises:
        ConfigurationError: unsupported URI scheme, or an S3 URI without a bucket.
    """

    base_uri: str = ".lake"
    s3_endpoint_url: str | None = None
    s3_access_key_id: str | None = field(default=None, repr=False)
    s3_secret_access_key: str | None = field(default=None, repr=False)
    s3_region: str = "us-east-1"
    s3_conditional_put: str | None = "etag"

    def __post_init__(self) -> None:
        scheme = urlparse(self.base_uri).scheme
        if scheme in ("s3", "s3a"):
            if not urlparse(self.base_uri).netloc:
                raise ConfigurationError(
                    f"base_uri {self.base_uri!r} has no bucket; use s3://<bucket>/<prefix>"
                )
        elif scheme not in ("", "file"):
            raise ConfigurationError(
                f"base_uri scheme {scheme!r} is not supported; use a local path, file://, or s3://"
            )

    # -- locations ---------------------------------------------------------------------------
    @property
    def is_s3(self) -> bool:
        return urlparse(self.base_uri).scheme in ("s3", "s3a")

    @property
    def root(self) -> str:
        """Normalised root URI: ``s3://bucket/prefix`` or an absolute local path."""
        if self.is_s3:
            u = urlparse(self.base_uri)
            return f"s3://{u.netloc}/{u.path.strip('/')}".rstrip("/")
        p = urlparse(self.base_uri).path if self.base_uri.startswith("file:") else self.base_uri
        return os.path.abspath(p)

    def location(self) -> str:
        """Where the lake is, for error messages (never credentials)."""
        if self.is_s3:
            return (
                f"S3 endpoint {self.s3_endpoint_url}"
                if self.s3_endpoint_url
                else f"S3 (AWS, region {self.s3_region})"
            )
        return "the local filesystem"

    def uri(self, *parts: str) -> str:
        """URI of a path below the root (``parts`` joined with ``/``)."""
        return "/".join([self.root, *(p.strip("/") for p in parts if p)])

    def fs_path(self, uri: str) -> str:
        """Path of ``uri`` for :meth:`pyarrow_filesystem` (``bucket/key`` on S3, absolute locally)."""
        if uri.startswith("s3://"):
            return uri[len("s3://") :]
        if uri.startswith("file://"):
            return urlparse(uri).path
        return uri

    # -- library adapters --------------------------------------------------------------------
    def delta_storage_options(self) -> dict[str, str]:
        """``storage_options`` for deltalake (delta-rs object_store keys)."""
        if not self.is_s3:
            return {}
        opts: dict[str, str] = {"AWS_REGION": self.s3_region}
        if self.s3_endpoint_url:
            opts["AWS_ENDPOINT_URL"] = self.s3_endpoint_url
            if self.s3_endpoint_url.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.s3_access_key_id:
            opts["AWS_ACCESS_KEY_ID"] = self.s3_access_key_id
        if self.s3_secret_access_key:
            opts["AWS_SECRET_ACCESS_KEY"] = self.s3_secret_access_key
        if self.s3_conditional_put:
            opts["aws_conditional_put"] = self.s3_conditional_put
        else:
            opts["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
        return opts

    def pyarrow_filesystem(self):
        """A ``pyarrow.fs.FileSystem`` for this location (S3FileSystem or LocalFileSystem)."""
        from pyarrow import fs

        if not self.is_s3:
            return fs.LocalFileSystem()
        kw: dict[str, Any] = {"region": self.s3_region}
        if self.s3_endpoint_url:
            u = urlparse(self.s3_endpoint_url)
            kw["endpoint_override"] = u.netloc + u.path.rstrip("/")
            kw["scheme"] = u.scheme or "https"
        if self.s3_access_key_id:
            kw["access_key"] = self.s3_access_key_id
            kw["secret_key"] = self.s3_secret_access_key or ""
        return fs.S3FileSystem(**kw)

    def delta_filesystem(self, uri: str):
        """A ``pyarrow.fs.FileSystem`` rooted at the Delta table ``uri``, for deltalake's
        ``DeltaTable.to_pyarrow_table``/``to_pyarrow_dataset(filesystem=...)``.

        Without it deltalake (1.1 to 1.6.6, with pyarrow 21 to 26) hands pyarrow its own Rust
        file handler, and pyarrow's I/O threads still inside it when the interpreter exits abort
        the process (``terminate called without an active exception``, exit status 134) in about
        half of the runs; with a pyarrow filesystem none did (docs/output-layout.md, reading the
        lake with deltalake).
        """
        import os

        from pyarrow import fs

        path = self.fs_path(uri)
        return fs.SubTreeFileSystem(path if self.is_s3 else os.path.abspath(path), self.pyarrow_filesystem())

    def boto3_client(self):
        """A boto3 S3 client for this endpoint (only valid when :attr:`is_s3`): one per endpoint,
        credentials and region in the process, made at the first call (a client costs about
        10 ms to build, 0.2 s the first time; boto3 clients are thread-safe)."""
        return _s3_client(
            self.s3_endpoint_url, self.s3_access_key_id, self.s3_secret_access_key, self.s3_region
        )

    def put_if_absent(self, uri: str, body: bytes) -> bool:
        """Write ``body`` to ``uri`` only if no object exists there (atomic create-if-absent).

        S3: ``PutObject`` with ``If-None-Match: *`` (a conditional write: ``412 PreconditionFailed``
        or ``409 ConditionalRequestConflict`` when the key exists). Local filesystem: a temporary
        file hard-linked into place (``link`` fails when the name exists).

        Returns:
            ``True`` when this call wrote the object, ``False`` when one existed already (the
            first writer wins; read it back to use it).

        Raises:
            botocore ClientError / OSError: the lake cannot be written.
        """
        if self.is_s3:
            import botocore.exceptions

            bucket, _, key = uri[len("s3://") :].partition("/")
            try:
                self.boto3_client().put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
                return True
            except botocore.exceptions.ClientError as e:
                code = e.response.get("Error", {}).get("Code")
                if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                    return False
                raise
        import uuid

        path = self.fs_path(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(body)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def read_bytes(self, uri: str) -> bytes | None:
        """The object at ``uri``, or ``None`` when there is none (or it cannot be read)."""
        try:
            with self.pyarrow_filesystem().open_input_stream(self.fs_path(uri)) as fh:
                return fh.read()
        except (FileNotFoundError, OSError):
            return None

    def write_bytes(self, uri: str, body: bytes) -> None:
        """Write (replace) the object at ``uri``; local parent folders are created.

        Raises:
            OSError / botocore ClientError: the lake cannot be written.
        """
        with self._output_stream(uri) as out:
            out.write(body)

    def write_parquet(self, uri: str, table: pa.Table) -> None:
        """Write ``table`` as one Parquet file at ``uri`` (staged chunk rows: small, driver-side).

        Raises:
            OSError / botocore ClientError: the lake cannot be written.
        """
        import pyarrow.parquet as pq

        with self._output_stream(uri) as out:
            pq.write_table(table, out)

    def _output_stream(self, uri: str):
        """A pyarrow output stream that replaces the object at ``uri`` (local parents created)."""
        path = self.fs_path(uri)
        if not self.is_s3:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return self.pyarrow_filesystem().open_output_stream(path)

    def read_parquet(self, uri: str, columns: list[str] | None = None) -> pa.Table:
        """The Parquet file at ``uri`` read whole, or only ``columns`` (see :meth:`write_parquet`).

        Raises:
            FileNotFoundError / OSError: no such file, or it cannot be read.
        """
        import io

        import pyarrow.parquet as pq

        with self.pyarrow_filesystem().open_input_stream(self.fs_path(uri)) as fh:
            return pq.read_table(io.BytesIO(fh.read()), columns=columns)

    def first_write(self, uri: str, body: bytes) -> bytes | None:
        """:meth:`put_if_absent`, then the winner's body: ``None`` when this call wrote ``body``,
        else the bytes an earlier writer stored (chunk plans, follow-on windows: first writer wins).

        Raises:
            OSError: an object exists at ``uri`` but cannot be read back.
            botocore ClientError: the lake cannot be written.
        """
        if self.put_if_absent(uri, body):
            return None
        existing = self.read_bytes(uri)
        if existing is None:
            raise OSError(f"{uri} exists but cannot be read back")
        return existing

    def ensure_root(self) -> None:
        """Create the local root directory, or check that the S3 bucket exists.

        Raises:
            LakeUnavailableError: the S3 endpoint does not answer (connection refused or timed
                out, HTTP 5xx): an outage; the run fails and its window is retried.
            ConfigurationError: the bucket does not exist, or the endpoint refuses the credentials.
        """
        if not self.is_s3:
            os.makedirs(self.root, exist_ok=True)
            return
        from botocore.exceptions import ClientError, HTTPClientError
        from botocore.exceptions import ConnectionError as BotoConnectionError

        bucket = urlparse(self.base_uri).netloc
        where = self.s3_endpoint_url or "AWS"
        try:
            self.boto3_client().head_bucket(Bucket=bucket)
        except (BotoConnectionError, HTTPClientError) as e:
            raise LakeUnavailableError(
                f"The lake's S3 endpoint {where} does not answer ({type(e).__name__}: {e}). Nothing is "
                "lost: the sensor retries the window (with backoff) until it answers. Bring the object "
                "store back (locally: `bash infra/seaweedfs.sh start`) or fix `s3_endpoint_url`."
            ) from None
        except ClientError as e:
            code = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if code >= 500:
                raise LakeUnavailableError(
                    f"The lake's S3 endpoint {where} answers HTTP {code} for bucket {bucket!r} "
                    f"({type(e).__name__}: {e}). Nothing is lost: the sensor retries the window (with "
                    "backoff) until the object store works again."
                ) from None
            raise ConfigurationError(
                f"S3 bucket {bucket!r} at {where} cannot be used (HTTP {code or '?'}, {type(e).__name__}: "
                f"{e}). Create the bucket or fix `s3_endpoint_url` and the credentials."
            ) from None

    # -- transport to Spark executors ------------------------------------------------------
    def to_json(self) -> str:
        """Serialise including credentials (the content of the sealed storage file the Spark
        executors read, :func:`.spark_files.write_storage_ref`; never log it or pass it as an option)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StorageSettings:
        return cls(**json.loads(text))


@functools.lru_cache(maxsize=16)
def _s3_client(endpoint_url: str | None, key_id: str | None, secret: str | None, region: str | None):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name=region,
    )
