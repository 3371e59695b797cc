"""Zero-code capture of OpenAI SDK calls (sync, async, streaming; chat completions, completions, responses).

Uses the OpenInference OpenAI instrumentor (`openinference-instrumentation-openai`) for the LLM spans and
`token_ids` to record the token ids the server returned. The spans are renamed and mapped onto the `gen_ai.*`
conventions when stored (see `mapping`).
"""

from __future__ import annotations

import logging

from ._openinference import activate, deactivate
from .token_ids import install_token_id_recorder, uninstall_token_id_recorder

__all__ = ["instrument_openai", "uninstrument_openai"]

logger = logging.getLogger(__name__)

INSTRUMENTOR = "openinference.instrumentation.openai.OpenAIInstrumentor"


def instrument_openai() -> bool:
    """Trace every OpenAI client call of this process. Raises ImportError when `openai` or the instrumentor is missing.

    The token-id recorder must sit inside the instrumentor's wrapper; if the instrumentor was already turned on (by
    the application), it is turned off and on again around the recorder's installation.
    """
    import openai  # noqa: F401  - a clear ImportError when the SDK is absent
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        from .token_ids import is_installed

        if is_installed():
            return True
        logger.info("Re-instrumenting the OpenAI SDK so that token ids are recorded on its spans")
        instrumentor.uninstrument()
    install_token_id_recorder()
    try:
        return activate(INSTRUMENTOR, "openai")
    except ImportError:
        uninstall_token_id_recorder()
        raise


def uninstrument_openai() -> None:
    """Stop tracing OpenAI client calls."""
    deactivate(INSTRUMENTOR)
    try:
        uninstall_token_id_recorder()
    except ImportError:
        pass
