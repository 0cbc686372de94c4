"""One table's change events in a binlog window, on their way to the lake (:class:`TableEvents`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from ..errors import (
    ValueConversionError,
    describe,
)
from ..events import BinlogPosition, ChangeEventBuilder
from ..sink.lake import TableBatch
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions

log = logging.getLogger(__name__)


@dataclass
class SinkPart:
    """A finished part of a table's events in the window (see :meth:`TableEvents.schema_changed`)."""

    sink: TableBatch
    value_schema: pa.Schema
    truncated_at: BinlogPosition | None


class TableEvents:
    """Events of one table in the window: the builder of the current schema, finished record
    batches on their way to the sink (merged up to ``batch_rows`` while their schema is the same),
    and the table's :class:`~.sink.lake.TableBatch`, opened with the first record batch.

    A DDL that changes the table's primary key (or replaces the table by one keyed otherwise)
    ends the current batch: the events before it are one *part* (merged into the state by the old
    key), those after it the next (by the new key), committed in order with the batch identities
    of the window start and of the DDL's position (:meth:`parts`)."""

    def __init__(
        self,
        schema: TableSchema,
        options: TypeOptions,
        server_name: str,
        batch_rows: int,
        open_sink: Callable[[TableSchema, BinlogPosition | None], TableBatch],
        on_failure: Callable[[str, str, str], None] | None = None,
    ):
        self.on_failure = on_failure  # (table, position, reason) of a skipped event; None: fail
        self.options = options
        self.server_name = server_name
        self.batch_rows = batch_rows
        self.open_sink = open_sink
        self.sink: TableBatch | None = None
        self.sink_key: tuple[str, ...] | None = None
        self.sink_from: BinlogPosition | None = None  # None: the window start
        self.done_parts: list[SinkPart] = []
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.truncated_at: BinlogPosition | None = None
        #: why this table's events of the window cannot be written (its later events are dropped
        #: and nothing of it is committed: the table stops alone, see .isolation)
        self.failed: str | None = None
        self._set_schema(schema)

    def _set_schema(self, schema: TableSchema) -> None:
        self.schema = schema
        self.conv = TableConverter(schema, self.options, "binlog")
        self.builder = ChangeEventBuilder(
            self.conv.arrow_schema,
            self.conv.table.primary_key,  # the message key (message.key.columns)
            server_name=self.server_name,
            database=schema.database,
            table=schema.table,
        )
        self.names = schema.column_names

    def fail(self, error: BaseException) -> None:
        """This table's window cannot be written: drop what is pending, keep the first error."""
        if self.failed is None:
            self.failed = describe(error, 2000)
            log.warning("%s stops: %s", self.schema.qualified_name, self.failed, exc_info=error)
        self.pending, self.pending_rows = [], 0
        self._set_schema(self.schema)  # a fresh builder: events of a failed table are not kept

    def flush(self) -> None:
        if self.failed is not None:
            self._set_schema(self.schema)
            return
        try:
            self._flush()
        except Exception as e:  # a value that cannot be converted (failure mode "fail")
            self.fail(e)

    def _flush(self) -> None:
        if len(self.builder):
            try:
                batch = self.builder.to_record_batch()
            except ValueError:
                # event.processing.failure.handling.mode: fail names the table, the column and the
                # event's position; warn|skip drop the events holding a value that cannot be
                # converted, report each, and convert the rest
                bad = self.builder.unconvertible_values()
                if not bad:
                    raise
                if self.on_failure is None:
                    i, (column, why) = min(bad.items())
                    raise ValueConversionError(
                        self.schema.qualified_name, column, self.builder.event_position(i), why
                    ) from None
                for i, (column, why) in sorted(bad.items()):
                    self.on_failure(
                        self.schema.qualified_name, self.builder.event_position(i), f"{column}: {why}"
                    )
                self.builder.drop_events(set(bad))
                batch = self.builder.to_record_batch()
            if batch.num_rows:
                self._finished(batch)
            self._set_schema(self.schema)

    def _finished(self, batch: pa.RecordBatch) -> None:
        if self.pending and (
            not batch.schema.equals(self.pending[0].schema)
            or self.pending_rows + batch.num_rows > self.batch_rows
        ):
            self.hand_over()
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.batch_rows:
            self.hand_over()

    def hand_over(self) -> None:
        """Pass the pending record batches (as one) to the sink thread."""
        if not self.pending or self.failed is not None:
            self.pending, self.pending_rows = [], 0
            return
        try:
            self._hand_over()
        except Exception as e:  # this table's sink failed (an earlier record batch, a rewrite ...)
            self.fail(e)

    def _hand_over(self) -> None:
        batch = (
            self.pending[0]
            if len(self.pending) == 1
            else (pa.Table.from_batches(self.pending).combine_chunks().to_batches()[0])
        )
        self.pending, self.pending_rows = [], 0
        if self.sink is None:
            self.sink = self.open_sink(self.conv.table, self.sink_from)
            self.sink_key = tuple(self.conv.table.primary_key)
        self.sink.add(batch)

    def ensure_sink(self) -> None:
        """Open the table's batch now (a DDL: the commit gives the lake its new columns even when
        no event of the table follows in the window)."""
        self.flush()
        self.hand_over()
        if self.sink is None and self.failed is None:
            try:
                self.sink = self.open_sink(self.conv.table, self.sink_from)
            except Exception as e:
                self.fail(e)

    def finish(self) -> None:
        """Everything built so far goes to the sink."""
        self.flush()
        self.hand_over()

    def take_small(self, limit: int) -> pa.RecordBatch | None:
        """Flush, then take the pending events as one record batch when there are at most
        ``limit`` of them (to be written with other tables' in one job), opening the table's
        batch; otherwise hand them over as usual and return ``None``."""
        self.flush()
        if not self.pending or self.failed is not None or self.pending_rows > limit:
            self.hand_over()
            return None
        batch = (
            self.pending[0]
            if len(self.pending) == 1
            else pa.Table.from_batches(self.pending).combine_chunks().to_batches()[0]
        )
        self.pending, self.pending_rows = [], 0
        try:
            if self.sink is None:
                self.sink = self.open_sink(self.conv.table, self.sink_from)
                self.sink_key = tuple(self.conv.table.primary_key)
        except Exception as e:
            self.fail(e)
            return None
        return batch

    def append_batch(self, batch: pa.RecordBatch) -> None:
        """Add a ready change-log batch (built column-wise, e.g. a snapshot chunk)."""
        self.flush()
        if batch.num_rows:
            self._finished(batch)

    def schema_changed(self, schema: TableSchema, at: BinlogPosition | None = None) -> None:
        """The table's schema changed (a DDL at ``at``): later events use it. When the message key
        changes and events were written with the old one, the current part ends here."""
        if schema == self.schema:
            return
        self.flush()
        new_key = tuple(TableConverter(schema, self.options, "binlog").table.primary_key)
        if at is not None and new_key != tuple(self.conv.table.primary_key):
            self.end_part(at)  # with the old schema: the part so far is written by the old key
        self._set_schema(schema)

    def end_part(self, at: BinlogPosition) -> None:
        """Hand the pending events over and close the current part: later events go to a new
        part whose batch identity is ``at`` (a DDL's position)."""
        self.hand_over()
        if self.sink is not None:
            self.sink.drain()  # the next part starts from the state this one leaves (same Delta tables)
            self.done_parts.append(SinkPart(self.sink, self.conv.arrow_schema, self.truncated_at))
            self.sink = None
            self.truncated_at = None
        self.sink_from = at

    def parts(self) -> list[SinkPart]:
        """The table's parts in binlog order (the open one last), to commit in that order."""
        out = list(self.done_parts)
        if self.sink is not None:
            out.append(SinkPart(self.sink, self.conv.arrow_schema, self.truncated_at))
        return out

    def maybe_flush(self) -> None:
        if len(self.builder) >= self.batch_rows:
            self.flush()


def remap_unknown_columns(values: dict, names: list[str]) -> dict:
    """Row dict keyed ``UNKNOWN_COL<i>`` (no binlog_row_metadata) → keyed by schema names."""
    return {names[int(k[len("UNKNOWN_COL") :])]: v for k, v in values.items()}
