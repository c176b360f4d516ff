"""The one build step pyproject.toml cannot state (everything else is there): the shipped search spaces go into
the package as `sweep/spaces/`, copied from `search_spaces/` at the top of the checkout, where the README, the
docs and the tests name them. `stitchsweep plan NAME` and `stitchsweep init NAME` read them
(`sweep/config/shipped.py`); an editable install reads the checkout's `search_spaces/` itself."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SPACES = Path(__file__).resolve().parent / "search_spaces"


class BuildPy(build_py):
    """setuptools' build_py, then every `*.yaml` under search_spaces/ into the build's sweep/spaces/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "sweep" / "spaces"
        for src in sorted(SPACES.rglob("*.yaml")):
            dest = target / src.relative_to(SPACES)
            self.mkpath(str(dest.parent))
            self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildPy})
