"""Fixture plugins: local servers that speak the real wire protocols (registered in conftest)."""
import importlib.util

from tests.fakes.openai_stub import openai_stub  # noqa: F401

if importlib.util.find_spec("tests.fakes.image_server"):
    from tests.fakes.image_server import *  # noqa: F401,F403
if importlib.util.find_spec("tests.fakes.labelstudio"):
    from tests.fakes.labelstudio import *  # noqa: F401,F403
