"""mcpx: a Model Context Protocol gateway for every revision, in both directions."""

__version__ = "0.1.0"
