"""The differential conformance suite for tables: every public table operation, and every
numpy function that takes a column, against pandas' nullable dtypes (pyarrow.compute,
or numpy on a masked array, where pandas has no answer), on hypothesis-drawn tables of
every column kind with missing values, in memory, on disk and in bcolz's layout.

``tables.py`` draws the tables and their pandas reference; ``flights.py`` builds a
flights-like table.  Each test runs a few examples in CI; ``CARRAY_SOAK=1`` runs many.
"""
