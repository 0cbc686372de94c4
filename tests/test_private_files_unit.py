"""Sealed private files (dagster_mysql_cdc/private_files.py): what rests on a disk is ciphertext,
only the writer's keyed data source class opens it, and the key travels inside that class."""

import gc
import os
import stat

import pytest
from pyspark import cloudpickle

from dagster_mysql_cdc.private_files import PrivateFiles, SealedDataSource
from dagster_mysql_cdc.sink.spark_files import DeltaFilesDataSource, read_storage_ref, write_storage_ref
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.connection import ConnectionSettings
from dagster_mysql_cdc.source.split_reader import SplitJob, SplitsDataSource, read_job_ref, write_job_ref

SECRET = "s3-secret-0123456789"
PASSWORD = "Pw-unit-9876543210"


def _storage() -> StorageSettings:
    return StorageSettings(
        base_uri="s3://bucket/prefix", s3_access_key_id="AKIDUNIT", s3_secret_access_key=SECRET
    )


def test_a_sealed_file_is_private_ciphertext_that_its_writers_key_opens():
    files = PrivateFiles()
    path = write_storage_ref(_storage(), files)
    assert os.path.dirname(path) == files.directory and os.path.basename(path).startswith("cdc-storage-")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(files.directory).st_mode) == 0o700
    data = open(path, "rb").read()
    assert SECRET.encode() not in data and b"AKIDUNIT" not in data and b"bucket" not in data
    assert read_storage_ref(path, files.data_source(DeltaFilesDataSource).file_key) == _storage()


def test_the_split_job_and_its_password_are_sealed_too():
    files = PrivateFiles()
    job = SplitJob(ConnectionSettings(user="cdc", password=PASSWORD), scan=None, groups=())  # type: ignore[arg-type]
    path = write_job_ref(job, files)
    assert PASSWORD.encode() not in open(path, "rb").read()
    assert read_job_ref(path, files.data_source(SplitsDataSource).file_key).settings.password == PASSWORD


def test_another_writers_key_or_no_key_is_refused_by_name():
    mine, theirs = PrivateFiles(), PrivateFiles()
    path = write_storage_ref(_storage(), mine)
    name = os.path.basename(path)
    with pytest.raises(ValueError, match=f"{name} was not sealed with this data source's key"):
        read_storage_ref(path, theirs.data_source(DeltaFilesDataSource).file_key)
    # the library's own class has no key: it must not be registered instead of the writer's
    with pytest.raises(ValueError, match="has no key: register the class PrivateFiles.data_source"):
        read_storage_ref(path, DeltaFilesDataSource.file_key)
    with open(path, "r+b") as fh:  # altered content fails authentication, not with garbage
        fh.seek(40)
        fh.write(b"A" if fh.read(1) != b"A" else b"B")
    with pytest.raises(ValueError, match="or altered"):
        read_storage_ref(path, mine.data_source(DeltaFilesDataSource).file_key)


def test_each_writer_registers_its_own_keyed_class_and_the_key_travels_in_its_pickle():
    a, b = PrivateFiles(), PrivateFiles()
    ka, kb = a.data_source(DeltaFilesDataSource), b.data_source(DeltaFilesDataSource)
    assert a.data_source(DeltaFilesDataSource) is ka  # once per writer and source
    assert issubclass(ka, DeltaFilesDataSource) and ka.file_key and ka.file_key != kb.file_key
    assert ka.name().startswith("mysql_cdc_delta_files_") and ka.name() != kb.name()
    assert DeltaFilesDataSource.name() == "mysql_cdc_delta_files"
    assert a.data_source(SplitsDataSource).name().startswith("mysql_cdc_splits_")
    # what spark.dataSource.register sends: the class by value (key included), its base by reference
    pickled = cloudpickle.dumps(ka)
    assert ka.file_key in pickled and b"DeltaFilesDataSource" in pickled
    # the name does not reveal the key
    assert ka.name().rsplit("_", 1)[1].encode() not in ka.file_key
    with pytest.raises(TypeError, match="not a SealedDataSource"):
        a.data_source(StorageSettings)
    assert issubclass(SplitsDataSource, SealedDataSource)


def test_the_private_directory_goes_with_the_writer():
    files = PrivateFiles()
    write_storage_ref(_storage(), files)
    directory = files.directory
    del files
    gc.collect()
    assert not os.path.exists(directory)
