"""Model routes, providers, structured output, the offline engine and the simulator.

Importing this package does not import the ``openai`` SDK or the simulator's server;
``foureyes.llm.openai_compat`` and ``foureyes.llm.simulate`` are imported on use.
"""

from foureyes.llm.calls import CallScope, ModelCaller, route_limit
from foureyes.llm.offline import OfflineProvider, offline_responder
from foureyes.llm.prompting import DATA_RULE, data_block, neutralise
from foureyes.llm.provider import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    ImagePart,
    JsonSchemaFormat,
    Provider,
    TextPart,
    ToolCall,
    Usage,
)
from foureyes.llm.routes import ProviderFactory, Routes, build_provider, known_kinds, route_kinds
from foureyes.llm.structured import (
    Clamped,
    ParseFailure,
    StructuredFailure,
    StructuredSuccess,
    complete_structured,
    json_schema_format,
    parse_structured,
)

__all__ = [
    "CallScope",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "Clamped",
    "DATA_RULE",
    "ImagePart",
    "JsonSchemaFormat",
    "ModelCaller",
    "OfflineProvider",
    "ParseFailure",
    "Provider",
    "ProviderFactory",
    "Routes",
    "StructuredFailure",
    "StructuredSuccess",
    "TextPart",
    "ToolCall",
    "Usage",
    "build_provider",
    "complete_structured",
    "data_block",
    "json_schema_format",
    "known_kinds",
    "neutralise",
    "offline_responder",
    "parse_structured",
    "route_kinds",
    "route_limit",
]
