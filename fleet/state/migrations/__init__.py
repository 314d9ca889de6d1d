"""Schema migrations per backend: ``MIGRATIONS[n]`` takes a store from version n-1 to n in one
transaction. SQLite's steps live in ``fleet.state.db`` (unchanged home); PostgreSQL's in
:mod:`fleet.state.migrations.postgres`. Both backends keep the same tables and columns, so
a version number means the same schema on either."""
