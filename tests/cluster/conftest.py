"""Many processes on one database: these tests need PostgreSQL.

The SQLite pass (``pytest`` without ``ALALLO_TEST_DATABASE=postgres``) does
not collect them; the PostgreSQL pass runs them.
"""

from support import TEST_DATABASE

collect_ignore_glob = ["test_*.py"] if TEST_DATABASE == "sqlite" else []
