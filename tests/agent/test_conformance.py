"""The provider conformance suite (shipped in :mod:`agent_apps.testing.conformance`) run
against the bundled providers, exactly as a provider package runs it against its own."""

from __future__ import annotations

import importlib.util

import pytest

from agent_apps.testing.conformance import Scripted, provider_suite, strands_bedrock

TestScripted = provider_suite(Scripted)
TestStrandsBedrock = pytest.mark.skipif(
    not (importlib.util.find_spec("strands") and importlib.util.find_spec("boto3")), reason="needs the strands extra"
)(provider_suite(strands_bedrock))
