"""Fixture plugins: local servers that speak the real wire protocols (registered in conftest)."""
import importlib.util

from tests.openai_stub import openai_stub  # noqa: F401

if importlib.util.find_spec("tests.image_server"):
    from tests.image_server import *  # noqa: F401,F403
if importlib.util.find_spec("tests.labelstudio_fixture"):
    from tests.labelstudio_fixture import *  # noqa: F401,F403
