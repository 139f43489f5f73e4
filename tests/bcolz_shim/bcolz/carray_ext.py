"""bcolz's extension module: its public class is carray's; ``chunk`` (one compressed
chunk as an object) is private to bcolz."""

from bcolz._absent import absent
from carray import carray  # noqa: F401

chunk = absent("bcolz.carray_ext.chunk")
