"""The decoding algorithms, one module each, every one a ``step(session) -> Round`` on the shared core."""

from . import ar, sd, slem, slrs, tli

ALGORITHMS = {"ar": ar, "sd": sd, "slem": slem, "tli": tli, "slrs": slrs}
