"""The wheel bundles native binaries (libzephon_c.so, zephond, zephonctl from `make
build`), so it is a platform wheel (cp3X-cp3X-linux_*), never py3-none-any; the build
stops, saying so, when they were not built."""
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution

NATIVE = Path(__file__).resolve().parent / "zephon" / "_native"
NEEDED = ("libzephon_c.so", "libzephon_spm_shim.so", "zephond", "zephonctl")


class BinaryDistribution(Distribution):
    """A distribution with native parts: the wheel is tagged for this platform."""

    def has_ext_modules(self):
        return True


missing = [name for name in NEEDED if not (NATIVE / name).is_file()]
if missing:
    raise SystemExit(f"zephon: {', '.join(missing)} not found in {NATIVE}; run `make build` "
                     "in the Zephon checkout first (the wheel bundles them)")

setup(distclass=BinaryDistribution)
