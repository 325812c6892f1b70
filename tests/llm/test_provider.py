import pytest
from pydantic import ValidationError

from foureyes.llm.provider import ChatMessage, ChatRequest, ImagePart, TextPart, ToolCall


def test_multipart_content_goes_out_as_openai_blocks() -> None:
    m = ChatMessage(
        role="user",
        content=(TextPart(text="look"), ImagePart(url="data:image/png;base64,AAAA")),
    )
    assert m.to_wire() == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    assert m.text == "look"


def test_reasoning_is_passed_back_only_with_tool_calls() -> None:
    call = ToolCall(id="c1", name="f", arguments="{}")
    with_tools = ChatMessage(role="assistant", reasoning_content="think", tool_calls=(call,))
    plain = ChatMessage(role="assistant", content="hi", reasoning_content="think")
    assert with_tools.to_wire()["reasoning_content"] == "think"
    assert with_tools.to_wire()["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert "reasoning_content" not in plain.to_wire()


def test_requests_are_strict() -> None:
    with pytest.raises(ValidationError):
        ChatRequest(messages=())
    with pytest.raises(ValidationError):
        ChatMessage(role="robot", content="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ChatRequest(messages=(ChatMessage.user("x"),), temperature=3)
