"""ftrans's version, at the bottom layer so the compilation cache can key on it."""

__version__ = "0.1.0"
