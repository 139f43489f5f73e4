"""The column table, ``ctable``: its storage, rows, queries and conversions."""
