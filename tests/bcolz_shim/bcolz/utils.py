"""bcolz's private helpers module (none has a carray counterpart)."""

from bcolz._absent import absent

to_ndarray = absent("bcolz.utils.to_ndarray")
