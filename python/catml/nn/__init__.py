"""Neural-network functions over traced values (`catml.nn.functional`)."""

from . import functional  # noqa: F401
