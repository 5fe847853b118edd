"""wire/apis.py: which API a path speaks."""

import pytest
from streamfix.wire.apis import api_for_path


@pytest.mark.parametrize(
    "path,api",
    [
        ("/v1/responses", "responses"),
        ("/responses", "responses"),
        ("/rec/x/v1/responses?stream=1", "responses"),
        ("/v1/chat/completions", "chat"),
        ("/chat/completions/", "chat"),
        ("/v1/messages", "messages"),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=k", "gemini"),
        ("/v1beta/models/gemini-2.5-pro:generateContent", "gemini"),
        ("/v1/models", None),
        ("/v1/messages/count_tokens", None),
        ("/exa.api_server_pb.ApiServerService/GetChatMessage", None),
        ("/v1/responses/resp_1/input_items", None),
    ],
)
def test_api_for_path(path, api):
    assert api_for_path(path) == api
