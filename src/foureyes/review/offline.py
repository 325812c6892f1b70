"""The offline engine's reviewer: honest about the one thing it knows, that it did not review.

The offline route calls no model, so it cannot judge a session. It could answer
``no_update``, but that would claim "I looked and have nothing to add", which is not
true. It answers instead, for every request, a packet-shaped notice (one item of kind
``unknown``) saying that the offline engine cannot review and that nothing was reviewed,
in the language of the reviewed session (zh-Hans, zh-Hant or en), deterministically.
The runner never accepts it as a review: an answer of the offline engine ends the run with
no packet and the reason ``reviewer_offline``, so nothing is published (the notice is
what the trace's model call returned, for anyone reading the record).
"""

from __future__ import annotations

import json

from foureyes.core.locale import Locale, detect_locale
from foureyes.core.roles import Role
from foureyes.llm.offline import offline_responder
from foureyes.llm.provider import ChatRequest
from foureyes.review.packet import PACKET_ROLE, Certainty, ItemKind, PacketStatus

__all__ = ["OFFLINE_NOTICE", "offline_review"]

OFFLINE_NOTICE: dict[Locale, str] = {
    Locale.ZH_HANS: "离线引擎无法审阅会话：本次没有进行任何审阅，请配置审阅模型的路由。",
    Locale.ZH_HANT: "離線引擎無法審閱會話：本次沒有進行任何審閱，請設定審閱模型的路由。",
    Locale.EN: (
        "The offline engine cannot review sessions: nothing was reviewed. "
        "Configure a model route for the reviewer role."
    ),
}
"""The content of the one item the offline reviewer returns, per locale."""


def _session_text(request: ChatRequest) -> str:
    # The last user message is the review instruction, always in English; the language
    # of the session shows in what comes before it.
    user_turns = [m.text for m in request.messages if m.role == "user"]
    return "\n".join(user_turns[:-1])


@offline_responder(Role.REVIEWER)
def offline_review(request: ChatRequest) -> str:
    """A valid packet with one ``unknown`` item: the offline engine did not review.

    The language follows the text of the reviewed session in ``request``.
    """
    notice = OFFLINE_NOTICE[detect_locale(_session_text(request))]
    item = {"kind": ItemKind.UNKNOWN, "certainty": Certainty.CERTAIN, "content": notice}
    packet = {"role": PACKET_ROLE, "status": PacketStatus.UPDATE, "items": [item]}
    return json.dumps(packet, ensure_ascii=False)
