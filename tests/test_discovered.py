"""A run worker builds its assets from the tables its code server discovered, not from the server
at the run's start (``dagster_integration/discovered.py``).

Found under ``dagster dev`` with two captures of one server: ``RENAME TABLE sakila.film_text TO
film_text2`` made every run the sensor requested for that window fail before its first step
(``DagsterInvalidSubsetError: AssetKey(s) ['.../film_text'] were selected, but no
AssetsDefinition objects supply these keys``): the run worker imported the code location again,
``discover_tables()`` read the server again and the renamed table's asset was gone. The capture
stalled, retrying with backoff, until the code location was reloaded.

The test goes through Dagster's own loading functions in separate processes, as Dagster loads a
code location: the code server initializes it (``initialize_repository_def_from_pointer``, its
``repository_load_data`` is what a run's execution plan snapshot stores) and a run worker
reconstructs it from that load data (``ReconstructableRepository.with_repository_load_data``, as
``dagster._grpc.impl`` does for a run with ``has_repository_load_data``). Real MariaDB, no mocks.
"""

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import MYSQL_HOST, MYSQL_PORT, ROOT, ROOT_PASSWORD
from sensor_harness import scratch_database

pytestmark = pytest.mark.integration

LOCATION = """
import dagster as dg
from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets

mysql = MySqlCdcResource(host={host!r}, port={port}, user="root", password={password!r},
                         server_name="disc", database_include_list=[{db!r}])

@mysql_cdc_assets(tables=mysql.discover_tables(), server_name="disc")
def disc_cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
    yield from mysql.sync(context=context, lake=lake)

defs = dg.Definitions(assets=[disc_cdc], sensors=[build_mysql_cdc_sensor(disc_cdc)],
                      resources={{"mysql": mysql, "lake": CdcLakeResource(base_uri={lake!r})}})
"""

# the code server: initialize the code location, keep its load data (what a run stores)
INITIALIZE = """
import json, sys
from dagster._core.code_pointer import CodePointer
from dagster._core.definitions.reconstruct import initialize_repository_def_from_pointer
from dagster._serdes import serialize_value
repo = initialize_repository_def_from_pointer(CodePointer.from_python_file(sys.argv[1], "defs", None))
open(sys.argv[2], "w").write(serialize_value(repo.repository_load_data))
print(json.dumps(sorted(k.path[-1] for k in repo.asset_graph.get_all_asset_keys())))
"""

# a run worker: reconstruct it from that load data, then the run's job with the old selection
RECONSTRUCT = """
import json, sys
import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._serdes import deserialize_value
data = deserialize_value(open(sys.argv[2]).read())
repo = ReconstructableRepository.for_file(sys.argv[1], "defs").with_repository_load_data(data).get_definition()
selected = {dg.AssetKey(["disc", sys.argv[3], t]) for t in json.loads(sys.argv[4])}
job = repo.get_maybe_subset_job_def("disc_cdc_capture", asset_selection=selected)
print(json.dumps(sorted(k.path[-1] for k in repo.asset_graph.get_all_asset_keys())))
"""


def run(script: str, *args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_run_worker_keeps_the_tables_its_code_server_discovered(tmp_path):
    with scratch_database("disc") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.films (id INT PRIMARY KEY, title VARCHAR(20))")
            cur.execute(f"CREATE TABLE {db}.gone (id INT PRIMARY KEY)")
        location = tmp_path / "location.py"
        location.write_text(
            LOCATION.format(
                host=MYSQL_HOST, port=MYSQL_PORT, password=ROOT_PASSWORD, db=db, lake=str(tmp_path)
            )
        )
        load_data = tmp_path / "load_data.json"
        tables = ["binlog", "films", "gone"]
        assert run(INITIALIZE, str(location), str(load_data)) == tables

        with conn.cursor() as cur:  # another application renames one table and drops the other
            cur.execute(f"RENAME TABLE {db}.films TO {db}.films_v2")
            cur.execute(f"DROP TABLE {db}.gone")

        # the run the sensor requested for that window selects the tables the code server knows
        assert run(RECONSTRUCT, str(location), str(load_data), db, json.dumps(["films", "gone"])) == tables
        # a reload of the code location reads the server again
        assert run(INITIALIZE, str(location), str(tmp_path / "reloaded.json")) == ["binlog", "films_v2"]
