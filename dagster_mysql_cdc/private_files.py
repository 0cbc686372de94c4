"""Private files for the Spark executors, sealed with a key that never rests on a disk.

The Spark jobs of a :class:`~dagster_mysql_cdc.sink.lake.LakeWriter` need secrets on the
executors: the lake's S3 keys (:mod:`dagster_mysql_cdc.sink.spark_files` writes the data files with them) and, for
split reads, the source's password (:mod:`dagster_mysql_cdc.source.split_reader`). They cannot be
data source options (Spark and py4j log options; a Spark Connect server shows them in its UI and
event log), so they travel in files the driver writes and, on a cluster, ships with
``SparkContext.addFile`` / a Spark Connect artifact: a copy lands in every executor's working
directory (standalone: ``SPARK_WORKER_DIR/<app id>/<executor id>/``) and stays there after the
application ends.

Every such file is therefore **sealed**: encrypted and authenticated with Fernet
(``cryptography``: AES-128-CBC + HMAC-SHA256, a random IV per file) under a key that is fresh per
writer (:class:`PrivateFiles`, one per run's sync) and exists only in memory:

- the driver keeps it in this object;
- it reaches the Spark side inside the data source class the writer registers
  (:meth:`PrivateFiles.data_source`: a subclass of the library's data source, pickled by value
  with the key as a class attribute, registered under its own name
  ``<format>_<random id>``). Spark keeps a registered Python data source as pickled bytes in the
  session's memory; its planner worker instantiates it and pickles the reader/writer (and so the
  key) into the tasks' Python command, which reaches the executors in the task binary, in memory.
  Neither the UI, the event log nor a plan shows the pickled bytes (a Spark Connect server's
  statement text keeps 8 bytes of a ``bytes`` field);
- an executor's task reads the sealed file from its ``SparkFiles`` directory (or the driver's
  path when it shares the driver's disk) and decrypts it in memory (:func:`read_private_file`).

So the files left on the workers are ciphertext whose key was never written anywhere: once the
run's process and the Spark application are gone, nothing can open them. ``tests/test_spark_cluster.py``
searches a standalone cluster's worker directory, event log and UI for the secrets.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import uuid
import weakref
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken


class PrivateFiles:
    """The sealed private files of one writer: a fresh Fernet key and a private (0700) directory
    on the driver, removed when this object is garbage-collected.

    The key is never written to a file, a log or a Spark option; it leaves the driver only inside
    the data source classes of :meth:`data_source`.
    """

    def __init__(self) -> None:
        self._key = Fernet.generate_key()
        self._fernet = Fernet(self._key)
        #: suffix of this writer's data source names (random: says nothing about the key)
        self._tag = uuid.uuid4().hex[:12]
        self._sources: dict[type[Any], type[Any]] = {}
        self.directory = tempfile.mkdtemp(prefix="cdc-ref-")
        weakref.finalize(self, shutil.rmtree, self.directory, True)

    def write(self, data: bytes, prefix: str, suffix: str) -> str:
        """Seal ``data`` into a new file (mode 0600) in :attr:`directory`; returns its path.

        The file name is ``<prefix><random><suffix>`` (unique, so shipped files never collide in
        an executor's ``SparkFiles`` directory); its content is a Fernet token.
        """
        fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=self.directory)  # 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(self._fernet.encrypt(data))
        return path

    def data_source(self, source: type[Any]) -> type[Any]:
        """The data source class to register for ``source`` (a :class:`SealedDataSource`
        subclass): a subclass carrying this writer's key, named ``<library name>_<random id>``
        (one per writer and source, so writers sharing a Spark session never read each other's
        files with the wrong key). Created once per ``source``.

        Raises:
            TypeError: ``source`` is not a :class:`SealedDataSource`.
        """
        if not (isinstance(source, type) and issubclass(source, SealedDataSource)):
            raise TypeError(f"{source!r} does not read sealed files (not a SealedDataSource)")
        keyed = self._sources.get(source)
        if keyed is None:
            # a class made here is not importable by name, so cloudpickle pickles it (and the key)
            # by value; its base class travels by reference (the executors import the package)
            keyed = type(
                f"Sealed{source.__name__}",
                (source,),
                {"file_key": self._key, "format_name": f"{source.library_name}_{self._tag}"},
            )
            self._sources[source] = keyed
        return keyed


class SealedDataSource:
    """Mixin (first base) of the library's Python data sources whose options name sealed files:
    the key and the registered name come from the subclass :meth:`PrivateFiles.data_source`
    makes (``file_key`` is ``None`` on the library's own class, which cannot open sealed files)."""

    #: the library's name of the data source (e.g. ``mysql_cdc_delta_files``)
    library_name: str = ""
    #: Fernet key of the files this class's readers/writers open (set on the writer's subclass)
    file_key: bytes | None = None
    #: the name the writer's subclass is registered under
    format_name: str = ""

    @classmethod
    def name(cls) -> str:
        """``DataSource.name()``: the writer's subclass's ``format_name``, else the library's name."""
        return cls.format_name or cls.library_name


def read_private_file(path: str, key: bytes | None) -> bytes:
    """The content of the sealed file ``path``, decrypted in memory with ``key``.

    An executor that does not share the driver's disk finds the shipped copy under its base name
    in its ``SparkFiles`` directory.

    Raises:
        ValueError: no key (the library's data source was registered instead of the writer's
            keyed subclass), or the file was not sealed with ``key`` (it names another writer's
            file, or was altered: Fernet authenticates the content).
        FileNotFoundError: the file was neither at ``path`` nor shipped to this executor.
    """
    if key is None:
        raise ValueError(
            f"{os.path.basename(path)} is a sealed private file and this data source has no key: "
            "register the class PrivateFiles.data_source() returns (LakeWriter.register_data_source), "
            "not the library's data source class itself"
        )
    if not os.path.exists(path):
        from pyspark import SparkFiles

        path = SparkFiles.get(os.path.basename(path))
    with open(path, "rb") as fh:
        token = fh.read()
    try:
        return Fernet(key).decrypt(token)
    except InvalidToken:
        raise ValueError(
            f"{os.path.basename(path)} was not sealed with this data source's key (a file of another "
            "writer, or altered); each LakeWriter reads only the files it wrote"
        ) from None


_Job = TypeVar("_Job")


def write_pickled(obj: object, files: PrivateFiles, prefix: str) -> str:
    """Seal the pickled ``obj`` (a Spark job's description: connection settings with the password,
    schemas, ranges) into a new private file ``<prefix><random>.pkl`` of ``files``; returns its path."""
    return files.write(pickle.dumps(obj), prefix=prefix, suffix=".pkl")


def read_pickled(path: str, key: bytes | None, cls: type[_Job]) -> _Job:
    """The ``cls`` object a :func:`write_pickled` file holds, decrypted with ``key`` (see
    :func:`read_private_file`: on a cluster executor, its ``SparkFiles`` copy).

    Raises:
        ValueError: ``key`` is not the file's (or none); FileNotFoundError: no such file here;
        TypeError: the file holds no ``cls``.
    """
    obj = pickle.loads(read_private_file(path, key))
    if not isinstance(obj, cls):
        raise TypeError(f"{path} does not hold a {cls.__name__}")
    return obj
