"""Core statements compiled once per database dialect and run on the driver's cursor.

``Connection.execute(statement, rows)`` prepares every row's parameters in
Python (``SQLCompiler.construct_params``, per row and per statement), and
every statement, even ``exec_driver_sql``, builds an execution context and a
result object; for the store's hot writes (a batch of job creations or
changes, :mod:`alallo.store._saves`) that cost several times SQLite's own
work for them (``bench/bench_store.py``, profiled: a batch of one job took
~5 statements x ~40 us of SQLAlchemy around ~5 us of SQLite each). A
:class:`Prepared` statement is compiled once per dialect by SQLAlchemy, then
run on the transaction's own DBAPI connection: rows are tuples that go to the
driver's ``execute``/``executemany`` as they are (SQLite; reordered when the
driver wants another order, named for PostgreSQL's driver). A driver error
goes through the connection's own error handling, so it arrives as
SQLAlchemy's exception (the store translates those) and a dropped connection
is invalidated as with ``Connection.execute``.

Only statements whose parameters need no conversion qualify (strings,
integers, floats, None: no bind processors, no expanding ``IN``) and whose
every parameter is one of ``names`` (a literal is written with
``sa.literal_column``); another statement is refused when it is first
compiled. Engine events (``before_cursor_execute``) and echo do not see
these statements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared"]

_Rows = Callable[[Sequence[tuple[Any, ...]]], Sequence[Any]]


class Prepared:
    """A Core statement run through the driver, compiled once per dialect.

    Args:
        statement: the statement; its parameters are named
            (``sa.bindparam("job_id")``, or the columns of an insert).
        names: the parameters in the order every row gives them; for an
            insert, the columns it sets (the others get their defaults).
    """

    __slots__ = ("_compiled", "_insert", "_names", "_statement")

    def __init__(self, statement: sa.ClauseElement, names: Sequence[str]) -> None:
        self._statement = statement
        self._names = tuple(names)
        self._insert = isinstance(statement, sa.Insert)
        self._compiled: dict[str, tuple[str, _Rows]] = {}

    def execute(self, c: sa.Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        """Run the statement once per row of ``rows`` (one ``executemany`` for several).

        Returns:
            The rows it changed, all runs together (the driver's ``rowcount``).

        Raises:
            sqlalchemy.exc.DBAPIError: the database refused it (as ``Connection.execute``).
        """
        cursor = self._run(c, rows)
        count = int(cursor.rowcount)
        cursor.close()
        return count

    def one(self, c: sa.Connection, *row: Any) -> Any:
        """Run the statement once, with ``row`` as its parameters (in the order of ``names``);
        return its first row (None if none)."""
        cursor = self._run(c, [row])
        first = cursor.fetchone()
        cursor.close()
        return first

    def _run(self, c: sa.Connection, rows: Sequence[tuple[Any, ...]]) -> Any:
        sql, convert = self._compiled.get(c.dialect.name) or self._compile(c.dialect)
        params = convert(rows)
        cursor = c.connection.cursor()
        try:
            if len(params) == 1:
                cursor.execute(sql, params[0])
            else:
                cursor.executemany(sql, params)
        except Exception as exc:
            # SQLAlchemy's own path for a failed statement: wrapped as its DBAPIError
            # subclass, and the connection invalidated if the database went away.
            c._handle_dbapi_exception(exc, sql, params, cursor, None)
        return cursor

    def _compile(self, dialect: sa.Dialect) -> tuple[str, _Rows]:
        compiled = self._statement.compile(
            dialect=dialect, column_keys=list(self._names) if self._insert else None)
        assert isinstance(compiled, SQLCompiler)
        used = list(compiled.bind_names.values())
        if (compiled._bind_processors or "POSTCOMPILE" in compiled.string
                or sorted(used) != sorted(self._names)):
            raise ValueError(f"cannot run as the driver's SQL with the parameters "
                             f"{self._names}: {compiled.string}")
        names = self._names
        convert: _Rows
        if compiled.positiontup is None:  # named placeholders (psycopg)
            def convert(rows: Sequence[tuple[Any, ...]]) -> Sequence[Any]:
                return [dict(zip(names, row, strict=True)) for row in rows]
        elif tuple(compiled.positiontup) == names:
            def convert(rows: Sequence[tuple[Any, ...]]) -> Sequence[Any]:
                return rows
        else:
            pick = itemgetter(*(names.index(name) for name in compiled.positiontup))
            if len(names) == 1:
                def convert(rows: Sequence[tuple[Any, ...]]) -> Sequence[Any]:
                    return rows
            else:
                def convert(rows: Sequence[tuple[Any, ...]]) -> Sequence[Any]:
                    return [pick(row) for row in rows]
        entry = (compiled.string, convert)
        self._compiled[dialect.name] = entry
        return entry
