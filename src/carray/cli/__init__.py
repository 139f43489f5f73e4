"""The ``carray`` command line: a thin main and one module per verb group."""
