"""codemode: the HTTP host that runs JavaScript cells in supervised QuickJS workers."""

__version__ = "0.1.0"
