"""``StorageSettings.put_if_absent``: the atomic create-if-absent write behind chunk plans and
follow-on windows (first writer wins), on the local filesystem and on SeaweedFS's S3 API."""

import threading

from dagster_mysql_cdc.sink.storage import StorageSettings


def _read(storage: StorageSettings, uri: str) -> bytes:
    with storage.pyarrow_filesystem().open_input_stream(storage.fs_path(uri)) as fh:
        return fh.read()


def test_first_writer_wins(storage: StorageSettings):
    uri = storage.uri("_staging", "srv", "put_if_absent", "a.json")
    assert storage.put_if_absent(uri, b"first") is True
    assert storage.put_if_absent(uri, b"second") is False
    assert _read(storage, uri) == b"first"


def test_concurrent_writers_agree_on_one_winner(storage: StorageSettings):
    uri = storage.uri("_staging", "srv", "put_if_absent", "race.json")
    results: dict[int, bool] = {}

    def put(i: int) -> None:
        results[i] = storage.put_if_absent(uri, f"writer-{i}".encode())

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1, results
    assert _read(storage, uri) == f"writer-{winners[0]}".encode()


def test_first_write_returns_the_winners_body(storage: StorageSettings):
    uri = storage.uri("_staging", "srv", "put_if_absent", "first_write.json")
    assert storage.read_bytes(uri) is None
    assert storage.first_write(uri, b"mine") is None  # this call wrote it
    assert storage.first_write(uri, b"later") == b"mine"  # a later writer gets the stored body
    assert storage.read_bytes(uri) == b"mine"
