"""addons/salvage.py: the wrapper around mitmproxy's protocol-error path."""

from __future__ import annotations

from types import SimpleNamespace

from mitmproxy.proxy.layers.http import HttpStream, SendHttp
from mitmproxy.proxy.layers.http._events import ErrorCode, ResponseData, ResponseProtocolError
from streamfix.addons import salvage


class Held:
    def __init__(self, out: list[bytes]) -> None:
        self.out = out
        self.calls = 0

    def salvage(self) -> list[bytes]:
        self.calls += 1
        out, self.out = self.out, []
        return out


def _layer(stream, streaming: bool = True) -> SimpleNamespace:
    layer = SimpleNamespace(
        flow=SimpleNamespace(response=SimpleNamespace(stream=stream)),
        stream_id=1,
        context=SimpleNamespace(options=SimpleNamespace(store_streamed_bodies=True), client="client"),
        response_body_buf=b"",
    )
    layer.state_stream_response_body = lambda e: None
    layer.state_errored = lambda e: None
    layer.server_state = layer.state_stream_response_body if streaming else layer.state_errored
    layer.client_state = None
    return layer


def test_installed_once_and_idempotent():
    assert salvage._install() is None
    wrapped = HttpStream.handle_protocol_error
    assert getattr(wrapped, salvage.MARK)
    assert salvage._install() is None
    assert HttpStream.handle_protocol_error is wrapped  # a reload does not wrap twice
    assert not getattr(wrapped.__wrapped__, salvage.MARK, False)


def test_held_bytes_go_to_the_client_before_mitmproxys_error_handling():
    salvage._install()
    held = Held([b"data: {}\n\n", b"data: {"])
    layer = _layer(held)
    gen = HttpStream.handle_protocol_error(
        layer, ResponseProtocolError(1, "peer closed", ErrorCode.GENERIC_SERVER_ERROR)
    )
    first, second = next(gen), next(gen)
    for cmd, want in ((first, b"data: {}\n\n"), (second, b"data: {")):
        assert isinstance(cmd, SendHttp) and cmd.connection == "client"
        assert isinstance(cmd.event, ResponseData) and cmd.event.data == want
    assert layer.response_body_buf == b"data: {}\n\ndata: {"  # store_streamed_bodies kept it
    assert held.calls == 1


def test_left_alone_when_not_streaming_or_not_ours():
    salvage._install()
    held = Held([b"x"])
    for layer in (_layer(held, streaming=False), _layer(True), _layer(None)):
        layer.flow.error = None
        gen = HttpStream.handle_protocol_error(
            layer, ResponseProtocolError(1, "peer closed", ErrorCode.GENERIC_SERVER_ERROR)
        )
        try:
            cmd = next(gen)
        except (StopIteration, AttributeError):  # mitmproxy's own path needs a real layer
            continue
        assert not (isinstance(cmd, SendHttp) and isinstance(cmd.event, ResponseData))
    assert held.calls == 0  # not streaming the response: nothing asked of the stream
