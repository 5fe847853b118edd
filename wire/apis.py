"""Which API a request speaks, and the repairer for it.

The path decides (query string ignored, any prefix allowed, so ``/v1/responses``,
``/responses`` and ``/openai/v1/responses`` are all Responses):

- ``.../responses``                 -> ``responses``
- ``.../chat/completions``          -> ``chat``
- ``.../messages``                  -> ``messages`` (Anthropic)
- ``...:streamGenerateContent`` / ``...:generateContent`` -> ``gemini``
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal, Protocol
from urllib.parse import unquote

from .chat import ChatRepairer, repair_chat_json
from .gemini import GeminiRepairer, repair_gemini_json
from .messages import MessagesRepairer, repair_messages_json
from .responses import ResponsesRepairer, repair_responses_json
from .rules import FlowContext, Rules
from .stream import ApiRepairer, EventRepairer
from .verdict import Verdict

Api = Literal["responses", "chat", "messages", "gemini"]


class JsonRepair(Protocol):
    """A non-stream JSON body's repair, in place: True if anything changed; ``fired``
    counts each rule that changed the body once."""

    def __call__(
        self, obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
    ) -> bool: ...


# api -> (stream repairer class, non-stream JSON repair function)
_REGISTRY: dict[str, tuple[type[ApiRepairer], JsonRepair]] = {
    "responses": (ResponsesRepairer, repair_responses_json),
    "chat": (ChatRepairer, repair_chat_json),
    "messages": (MessagesRepairer, repair_messages_json),
    "gemini": (GeminiRepairer, repair_gemini_json),
}


def api_for_path(path: str) -> Api | None:
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/responses") or p == "responses":
        return "responses"
    if p.endswith("/chat/completions"):
        return "chat"
    if p.endswith("/messages"):
        return "messages"
    if p.endswith((":streamGenerateContent", ":generateContent")):
        return "gemini"
    return None


def model_in_path(path: str) -> str | None:
    """The model a Gemini request names in its path (``/v1beta/models/MODEL:streamGenerateContent``,
    Vertex's ``.../publishers/google/models/MODEL:generateContent``; a model id may hold a
    ``/``, as ``devin/swe-2`` does), percent-decoded; None when the path names none."""
    p = path.split("?", 1)[0]
    at = p.rfind("/models/")
    if at < 0 or api_for_path(p) != "gemini":
        return None
    model = p[at + len("/models/") :].rpartition(":")[0]
    return unquote(model) or None


def stream_repairer(api: str, rules: Rules, ctx: FlowContext, verdict: Verdict) -> EventRepairer:
    return _REGISTRY[api][0](rules, ctx, verdict)


def json_repairer(api: str) -> JsonRepair:
    return _REGISTRY[api][1]
