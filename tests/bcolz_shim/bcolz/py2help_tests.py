"""The mock class bcolz's tests import."""

from unittest.mock import Mock  # noqa: F401
