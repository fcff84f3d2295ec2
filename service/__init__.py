"""codemode: the HTTP host that runs JavaScript cells in supervised QuickJS workers."""

from importlib.metadata import version

# One version source: pyproject.toml's [project] version, as installed (an editable install counts).
__version__ = version("codemode")
