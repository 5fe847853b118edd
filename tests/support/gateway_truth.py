"""What the sidecar cannot tell a client through a real gateway, cell by cell, with why.

The truth of a gateway cell is the real-CPA matrix's (tests/support/matrix_truth.py: the
provider's own ending in the client API's terms, gateway_matrix.told). Through the client
leg the sidecar tells it wherever the gateway's stream still shows it; :data:`CLIENT_LEG`
lists the cells where the gateway dropped every trace of it (only the provider's own
stream says what happened), :data:`BOTH_LEGS` those that both legs still cannot tell.
tests/addons/test_gateway_matrix.py keeps both exact: every cell not told true is listed,
and every entry has a cell not told true.
"""

from __future__ import annotations

Key = tuple[str, str, str, str]

_LL_NO_FINISH = (
    "LiteLLM ends a provider body that stopped without a finish (EOF, or [DONE] with none) as a success "
    "in the client's API, with nothing out of place: only the provider's stream shows the turn failed"
)
_LL_CONTEXT = (
    "LiteLLM writes Anthropic's model_context_window_exceeded as the API's normal end: only the provider's "
    "stream says the context window cut the turn"
)
_LL_PAUSE = (
    "LiteLLM writes Anthropic's pause_turn (a turn to be continued) as the API's normal end: only the "
    "provider's stream says the turn is not done"
)
_LL_CAP_CALL = (
    "LiteLLM writes Gemini's MAX_TOKENS on a call whose arguments parse as the API's tool end (tool_calls, "
    "tool_use, completed): only the provider's stream says the budget ran out"
)
_PK_CHAT = "Portkey's chat writes Anthropic's {} as finish_reason stop: only the provider's stream says otherwise"

CLIENT_LEG: dict[Key, str] = {
    **{
        ("litellm", p, a, t): _LL_NO_FINISH
        for p, a, t in (
            ("openai", "chat", "no_finish"),
            ("openai", "chat", "done_no_finish"),
            ("openai", "gemini", "no_finish"),
            ("openai", "gemini", "done_no_finish"),
            ("anthropic", "chat", "no_finish"),
            ("anthropic", "chat", "done_no_finish"),
            ("anthropic", "responses", "no_finish"),
            ("anthropic", "responses", "done_no_finish"),
            ("anthropic", "gemini", "no_finish"),
            ("anthropic", "gemini", "done_no_finish"),
            ("gemini", "chat", "no_finish"),
            ("gemini", "responses", "no_finish"),
            ("gemini", "messages", "no_finish"),
        )
    },
    **{("litellm", "anthropic", a, "context_window"): _LL_CONTEXT for a in ("chat", "responses", "gemini")},
    **{("litellm", "anthropic", a, "pause"): _LL_PAUSE for a in ("chat", "responses", "gemini")},
    **{("litellm", "gemini", a, "cap_call"): _LL_CAP_CALL for a in ("chat", "responses", "messages")},
    ("litellm", "openai", "gemini", "refusal"): "LiteLLM's Gemini API drops an OpenAI refusal (delta.refusal, "
    "then stop) and writes STOP: only the provider's stream shows the model declined",
    ("litellm", "openai", "messages", "safety"): "LiteLLM writes OpenAI's content_filter on /v1/messages as "
    "max_tokens, a word for truncation: only the provider's stream says a filter stopped it",
    **{
        ("portkey", "anthropic", "chat", t): _PK_CHAT.format(w)
        for t, w in (
            ("context_window", "model_context_window_exceeded"),
            ("pause", "pause_turn"),
            ("refusal", "refusal"),
        )
    },
    ("portkey", "gemini", "chat", "zero_items"): "Portkey sends an empty 200 body for a Gemini candidate without "
    "parts: an empty stream is told as a failure (rule no_events), never as a success it does not show",
}
"""(gateway, provider, client API, turn) -> why its client stream cannot show the turn's truth."""

BOTH_LEGS: dict[Key, str] = {
    ("portkey", "gemini", "chat", "zero_items"): "Portkey sends an empty 200 body for a Gemini candidate without "
    "parts; the provider's STOP is a success, but streamfix does not write a success the gateway never sent (an "
    "empty body stays a failure)",
}
"""(gateway, provider, client API, turn) -> why not even both legs tell it."""


def why(gateway: str, provider: str, api: str, turn: str, leg: str) -> str:
    table = CLIENT_LEG if leg == "client" else BOTH_LEGS
    return table.get((gateway, provider, api, turn), "(no reason recorded)")
