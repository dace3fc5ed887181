"""The module Inspect imports through the ``inspect_ai`` entry point: importing it
registers the ``h9sandbox`` sandbox provider."""

from . import H9SandboxEnvironment  # noqa: F401
