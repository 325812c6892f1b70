r"""Heuristics for instructions hidden in text: overrides, impersonated roles, jailbreaks.

Two checks over the same machinery, in English, Simplified and Traditional Chinese:

- :data:`INSTRUCTION_OVERRIDE` (``prompt_injection``): "ignore previous instructions"
  and its kin (``ignore_instructions``), text posing as the system, the developer or the
  assistant (``role_impersonation``), forged chat-template and tool markers such as
  ``<|im_start|>``, ``[INST]``, ``<<SYS>>``, ``</tool_result>`` or foureyes' own data
  delimiters (``fake_role_marker``), notes to whatever AI reads the text and orders to
  keep something from the user (``addressed_to_model``), asks for the system prompt
  (``prompt_extraction``), and orders to send the user's data somewhere (``exfiltration``);
- :data:`JAILBREAK_PERSONA` (``jailbreak``): personas and modes without rules (DAN,
  "do anything now", "you are no longer bound by", 越狱模式) and orders never to refuse.

The patterns were written per class, from the classes' published descriptions, before
they were measured on any corpus, and were not tuned on one afterwards (docs/inputs.md
has the rates, both ways). Each pattern runs on the text as written and on its keyword
fold (:func:`foureyes.core.fold.normalise`: case, width, invisible characters and spacing
tricks undone, ``-`` ``_`` ``*`` and line breaks read as spaces), both with angle-bracket
look-alikes read as ``<`` ``>`` (:func:`foureyes.llm.prompting.neutralise`); a match in
the fold is reported with the span of the characters it came from. So
``ＩＧＮＯＲＥ all previous instructions`` and ``忽 略 之 前 的 指 令`` are found;
a line-start pattern (``System:``) matches only in the text as written, where lines are.

They are heuristics: they catch the plain and the lightly disguised forms of each class
and miss paraphrases, other languages and attacks spread over sentences (docs/inputs.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from foureyes.inputs.check import (
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    Manifest,
)
from foureyes.llm.prompting import neutralise

__all__ = ["INSTRUCTION_OVERRIDE", "JAILBREAK_PERSONA", "heuristic_findings", "pattern_spans"]

# A determiner that points at instructions given before or by someone else ("all",
# "previous", "your"); "ignore the instructions on the box" has none and is not reported.
_STRONG_EN = (
    r"(?:all|any|every|your|previous|prior|above|earlier|preceding|former|original|"
    r"initial|existing|foregoing|system|safety|developer|default|preset|programmed|"
    r"built-in|built in)"
)
_WEAK_EN = r"(?:the|of|that|this|these|those|such|other|given|current|old|each)"
_OBJ_EN = (
    r"(?:instructions?|rules?|guidelines?|directives?|directions|prompts?|commands?|"
    r"constraints?|restrictions?|polic(?:y|ies)|programming|guardrails?|filters?|"
    r"system prompt|safeguards?|principles|training)"
)
_VERB_EN = (
    r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|skip|override|overriding|"
    r"bypass|bypassing|overlook|abandon|discard|neglect|drop|circumvent)"
)
_ZH_VERB = (
    r"(?:忽略|忽视|忽視|无视|無視|不要理会|不要理會|不理会|不理會|别管|別管|忘记|忘記|忘掉|"
    r"抛开|拋開|抛弃|拋棄|丢弃|丟棄|跳过|跳過|绕过|繞過|覆盖|覆蓋|违背|違背|放弃|放棄)"
)
# Like _STRONG_EN: before, above, all, yours, the system's. 我 ("my") is not among them:
# "忽略我之前的要求" is a user correcting themselves.
_ZH_STRONG = (
    r"(?:之前|此前|先前|以前|上面|以上|上述|前面|前述|原来|原來|原有|原先|所有|全部|一切|任何|"
    r"你的|您的|给你的|給你的|系统|系統|开发者|開發者|收到的|得到的|被给予的|被給予的)"
)
_ZH_ANY = rf"(?:{_ZH_STRONG}|掉|你|您|的|了|那些|这些|這些)"
# Objects that name a model's instructions need no determiner ("忽略指令"); everyday ones
# (rules, limits, settings: "跳过初始设定" skips a setup wizard) need one.
_ZH_MODEL_OBJ = r"(?:指令|指示|提示词|提示詞|系统提示|系統提示)"
_ZH_OBJ = (
    r"(?:规则|規則|限制|设定|設定|命令|约束|約束|准则|準則|守则|守則|政策|安全策略|内容政策|"
    r"內容政策|道德准则|道德準則|程序设定|程式設定)"
)

_IGNORE = (
    rf"\b{_VERB_EN}\s+(?:{_WEAK_EN}\s+){{0,2}}{_STRONG_EN}\s+"
    rf"(?:(?:{_WEAK_EN}|{_STRONG_EN})\s+){{0,3}}{_OBJ_EN}\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?)?(?:everything|all)\s+"
    r"(?:above|before|prior|previously|you(?:'ve|’ve| have) been (?:told|given))"
    r"|\b(?:do not|don't|don’t|stop|no longer|never)\s+(?:follow|follows|following|obey|"
    r"obeying|adhere to|comply with)\s+(?:your|the|any|those|these|its|previous|prior|"
    r"original|old)\s+(?:\w+\s+){0,2}(?:instructions|rules|guidelines|programming|"
    r"restrictions|policies)\b"
    r"|\b(?:new|updated|revised|real|actual|true|secret|hidden|additional|override)\s+"
    r"(?:system\s+)?instructions?\s*[:：]"
    r"|\byour\s+(?:new|real|true|actual|only)\s+(?:instructions?|task|goal|purpose|"
    r"objective|mission|job)\s+(?:is|are|will be)\b"
    rf"|{_ZH_VERB}{_ZH_ANY}{{0,6}}{_ZH_MODEL_OBJ}"
    rf"|{_ZH_VERB}{_ZH_ANY}{{0,3}}{_ZH_STRONG}{_ZH_ANY}{{0,4}}{_ZH_OBJ}"
    r"|(?:不要|不再|别再|別再|停止)(?:遵守|遵循|服从|服從|执行|執行|听从|聽從)(?:你的|之前的|原来的|原來的|"
    r"任何|所有)的?(?:指令|规则|規則|限制|设定|設定|准则|準則)"
    r"|(?:新的|真正的|实际的|實際的|真实的|真實的|隐藏的|隱藏的)(?:系统|系統)?(?:指令|指示|任务|任務)"
    r"(?:是|如下|[：:])"
    r"|(?:从现在|從現在)(?:开始|開始|起)[，,]?你(?:是|将|將|要|必须|必須|不再|只)"
)

_ROLE = (
    r"(?m:^[ \t>]*(?:#{1,6}[ \t]*)?(?:system|developer|assistant|human)"
    r"(?:[ \t]+(?:message|prompt|instructions?|override|note|notice|update))?[ \t]*[:：])"
    r"|\[(?:system|sys|admin|administrator|developer|assistant|instructions?)"
    r"(?:\s+(?:message|prompt|note|override|notice|update))?\]"
    r"|\{\{?\s*(?:system|sys)\s*\}\}?"
    r"|<\s*/?\s*(?:system|sys|developer|instructions?|admin|assistant)(?:[_ ](?:prompt|message))?"
    r"\s*>"
    r"|\bthis is (?:a |an |the )?(?:system|developer|administrator|admin|security|openai|"
    r"anthropic) (?:message|override|instruction|notice|command|update|alert)\b"
    r"|\b(?:message|instructions?|notice|override|command|update) from (?:the |your )?"
    r"(?:system|developers?|administrator|admin|openai|anthropic|system administrator)\b"
    r"|\bi am your (?:developer|creator|programmer|maker|owner|system administrator|"
    r"administrator|admin|operator)\b"
    r"|(?m:^[ \t]*(?:系统|系統)(?:消息|訊息|提示|指令|通知)?[ \t]*[：:])"
    r"|[【\[](?:系统|系統|管理员|管理員|开发者|開發者)(?:消息|訊息|指令|提示|通知)?[】\]]"
    r"|我是你的(?:开发者|開發者|管理员|管理員|创造者|創造者|创建者|創建者|主人|系统管理员|系統管理員|"
    r"程序员|程式設計師)"
    r"|(?:来自|來自)(?:系统|系統|开发者|開發者|管理员|管理員)(?:的)?(?:消息|訊息|指令|通知)"
)

_MARKER = (
    r"<\|\s*(?:im[_ ]start|im[_ ]end|im[_ ]sep|system|user|assistant|endoftext|"
    r"begin[_ ]of[_ ]text|end[_ ]of[_ ]text|start[_ ]header[_ ]id|end[_ ]header[_ ]id|eot[_ ]id|"
    r"eom[_ ]id|tool|ipython|python[_ ]tag|fim[_ ](?:prefix|suffix|middle))\s*\|>"
    r"|\[/?inst\]|<</?sys>>|<\s*/?\s*(?:start|end)[_ ]of[_ ]turn\s*>"
    r"|<\s*/?\s*(?:tool[_ ](?:call|result|response|output)s?|function[_ ](?:call|result)s?|"
    r"tool[_ ]use)\s*>"
    r"|(?m:^[ \t]*#{2,}[ \t]*(?:instruction|system|response)s?[ \t]*:?[ \t]*$)"
    r"|<<<\s*(?:end )?data\b|\bend data>>>"
)

_ADDRESSED = (
    r"\b(?:note|message|instructions?|attention|important|reminder|notice) (?:to|for) "
    r"(?:the |any |all )?(?:ai|a\.i\.|assistants?|llms?|language models?|chatbots?|"
    r"models?|agents?|gpt|chatgpt|claude|bots?)\b"
    r"|\bif you(?:'re| are|’re) (?:an? )?(?:ai|llm|large language model|language model|"
    r"ai assistant|assistant|chatbot|bot|gpt)(?: reading| processing| summari[sz]ing|,|\b)"
    r"|\b(?:dear |hey |attention,? )?(?:ai|assistant|chatbot|llm|gpt|chatgpt)\s*[,:]\s*"
    r"(?:ignore|forget|disregard|you must|you will|you are now|from now on|instead|do not tell)"
    r"|\bwhen (?:you|the (?:ai|assistant|model|llm)) (?:read|reads|see|sees|process|processes|"
    r"summari[sz]e|summari[sz]es) this\b"
    r"|\b(?:do not|don't|don’t|never) (?:tell|inform|mention (?:this |it )?to|reveal "
    r"(?:this |it )?to|let|alert|notify) the user\b"
    r"|\bwithout (?:telling|informing|alerting|notifying) the user\b"
    r"|\binstead of (?:summari[sz]ing|translating)\b"
    r"|(?:致|给|給)(?:AI|人工智能|助手|模型|机器人|機器人|大模型|语言模型|語言模型)(?:的)?"
    r"(?:指令|消息|訊息|说明|說明|备注|備註|提示|留言)"
    r"|如果你是(?:一个|一個)?(?:AI|人工智能|语言模型|語言模型|AI助手|助手|大模型|机器人|機器人)"
    r"|(?:不要|别|別|切勿|千万不要|千萬不要)(?:告诉|告訴|让|讓|通知|提醒)(?:用户|用戶|使用者)"
)

_EXTRACTION = (
    r"\b(?:reveal|print|show|output|repeat|display|leak|disclose|dump|recite|tell me|give me|"
    r"write out|share)(?: me)? (?:your|the) (?:(?:full|entire|original|hidden|secret|initial|"
    r"complete|exact|verbatim|whole) )*(?:system prompt|system message|initial prompt|"
    r"hidden prompt|pre-?prompt|hidden instructions|secret instructions|original instructions|"
    r"initial instructions|instructions you were given)\b"
    r"|\b(?:reveal|print|output|repeat|dump|leak|disclose|recite) (?:all )?your "
    r"(?:instructions|prompt|rules|guidelines)\b"
    r"|\bwhat (?:is|are|was|were) your (?:system prompt|initial instructions|original "
    r"instructions|hidden instructions)\b"
    r"|\brepeat (?:the |all )?(?:words|text) above\b"
    r"|(?:告诉|告訴|显示|顯示|输出|輸出|打印|泄露|洩露|重复|重複|透露|展示|说出|說出|给我看|給我看)"
    r"(?:我|一下)?你的(?:系统|系統)?(?:提示词|提示詞|初始指令|原始指令|系统提示|系統提示|系统指令|"
    r"系統指令|隐藏指令|隱藏指令)"
    r"|你的(?:系统提示词|系統提示詞|系统提示|系統提示|初始指令|原始指令)(?:是什么|是什麼|是啥|内容|內容)"
)

_EXFILTRATION = (
    r"\b(?:send|forward|post|upload|exfiltrate|leak|transmit|email|e-mail|copy) "
    r"(?:all |the |this |any |every )?(?:of )?(?:the )?(?:user(?:'s|’s|s')?|conversation|chat|"
    r"private|personal|sensitive|confidential|customer(?:'s|’s|s')?) (?:\w+ ){0,2}"
    r"(?:data|information|history|details|messages|credentials|passwords?|emails?|files|"
    r"keys?|tokens?|records)\s+to\b"
    r"|(?:把|将|將)(?:用户|用戶|使用者|客户|客戶)的?(?:数据|數據|资料|資料|信息|資訊|聊天记录|聊天記錄|"
    r"密码|密碼|个人信息|個人資訊|对话|對話)(?:发送|發送|发到|發到|上传|上傳|转发|轉發|传到|傳到)"
)

_PERSONA = (
    r"\bdo anything now\b"
    r"|(?-i:\bDAN\b)\s*(?:mode|[:(]|,? (?:which|who) stands)"
    r"|\b(?:as|you are|you're|you’re|act as|called|named|be) (?-i:DAN)\b"
    r"|\b(?:dan|jailbreak|jailbroken|unrestricted|evil|unfiltered|uncensored|"
    r"opposite|anarchy) mode\b"
    r"|\bdeveloper mode (?:output|response|enabled)\b"
    r"|\byou(?:'re| are|’re)? (?:now )?(?:a )?jailbr(?:oken|eak)\b"
    r"|\byou (?:are|will be|can be|have been|are now)(?: now)? (?:freed?|liberated|released) "
    r"from\b"
    r"|\byou(?:'re| are|’re)? (?:now |no longer |not )(?:bound|restricted|limited|constrained"
    r"|governed) by\b"
    r"|\byou (?:don't|don’t|do not|no longer) (?:have to |need to )?(?:follow|abide by|obey|"
    r"adhere to|care about) (?:any |the |your |openai(?:'s|’s)? )?(?:rules|guidelines|"
    r"polic(?:y|ies)|restrictions|filters|ethics|morals|content polic(?:y|ies))\b"
    r"|\b(?:unfiltered|uncensored|unrestricted|amoral|unethical|unbound|rule-?less|"
    r"limitless) (?:ai|a\.i\.|assistant|chatbot|model|language model|version|persona|"
    r"character|entity)\b"
    r"|\b(?:stay|remain) in character\b|\bbreak(?:ing)? character\b"
    r"|\b(?:pretend|act|behave|imagine|roleplay|role-play|role play) (?:as if |like |that )?"
    r"(?:you(?:'re| are|’re| were) )?(?:an? )?(?:ai|assistant|chatbot|model|character|"
    r"entity) (?:with no|without|that (?:has no|ignores|doesn't follow|does not follow))\b"
    r"|(?:扮演|假装|假裝|充当|充當|作为|作為|成为|成為)(?:一个|一個)?(?:没有|沒有|不受|无|無|摆脱了|擺脫了)"
    r"(?:任何)?(?:限制|约束|約束|道德|审查|審查|过滤|過濾|规则|規則)"
    r"|你(?:现在|現在|将|將|已经|已經|可以|从此|從此)?(?:不再|完全)?(?:不受|不再受|摆脱|擺脫|"
    r"不用遵守|无需遵守|無需遵守|不必遵守|不需要遵守|突破)(?:了)?(?:任何)?(?:的)?(?:道德|伦理|倫理|"
    r"法律|安全|内容|內容|审查|審查|OpenAI|openai)?(?:的)?(?:限制|约束|約束|束缚|束縛|审查|審查|"
    r"过滤|過濾|规则|規則|准则|準則|政策)"
    r"|你(?:现在|現在|已经|已經|从此|從此)(?:没有|沒有)任何(?:限制|约束|約束|规则|規則|审查|審查)"
    r"|(?:越狱|越獄|上帝|无限制|無限制|邪恶|邪惡|无审查|無審查|DAN)模式"
    r"|开发者模式(?:输出|回复|已开启|已启用)|開發者模式(?:輸出|回覆|已開啟|已啟用)"
    r"|(?:保持|不要脱离|不要脫離|不要跳出|不许脱离|不許脫離)(?:角色|人设|人設)"
)

# Not "you can't refuse my refund": a complaint says that. The order never to refuse
# anything, or to answer, is the jailbreak.
_REFUSAL = (
    r"\byou (?:will|must|shall|should) never(?: ever)? (?:refuse|decline|say no)\b"
    r"|\byou (?:will|must|shall|should|can|may) not (?:ever )?(?:refuse|decline) "
    r"(?:any|anything|a request|requests|to answer|my requests)\b"
    r"|\b(?:never|don't|don’t|do not) (?:ever )?refuse (?:any|anything|a request|requests|"
    r"to answer)\b"
    r"|\bwithout (?:any )?(?:refusals?|refusing)\b"
    r"|\b(?:never|don't|don’t|do not) (?:say|tell me) (?:that )?you (?:can't|can’t|cannot)\b"
    r"|你(?:必须|必須|要|将|將|永远|永遠)*(?:永远不|永遠不|绝不|絕不|不得|不可以|不能|不会|不會|不许|"
    r"不許)(?:能)?(?:拒绝|拒絕)(?:任何|回答|我的任何)"
    r"|(?:不许|不許|禁止|不准)(?:拒绝|拒絕)(?:任何|回答)"
)

_Pattern = tuple[FindingReason, InputCategory, re.Pattern[str]]


def _compile(reason: FindingReason, category: InputCategory, pattern: str) -> _Pattern:
    return reason, category, re.compile(pattern, re.IGNORECASE)


_INJECTION_PATTERNS: tuple[_Pattern, ...] = (
    _compile(FindingReason.IGNORE_INSTRUCTIONS, InputCategory.PROMPT_INJECTION, _IGNORE),
    _compile(FindingReason.ROLE_IMPERSONATION, InputCategory.PROMPT_INJECTION, _ROLE),
    _compile(FindingReason.FAKE_ROLE_MARKER, InputCategory.PROMPT_INJECTION, _MARKER),
    _compile(FindingReason.ADDRESSED_TO_MODEL, InputCategory.PROMPT_INJECTION, _ADDRESSED),
    _compile(FindingReason.PROMPT_EXTRACTION, InputCategory.PROMPT_INJECTION, _EXTRACTION),
    _compile(FindingReason.EXFILTRATION, InputCategory.PROMPT_INJECTION, _EXFILTRATION),
)
_JAILBREAK_PATTERNS: tuple[_Pattern, ...] = (
    _compile(FindingReason.JAILBREAK_PERSONA, InputCategory.JAILBREAK, _PERSONA),
    _compile(FindingReason.REFUSAL_SUPPRESSION, InputCategory.JAILBREAK, _REFUSAL),
)


def _brackets(text: str) -> str:
    """``text`` with angle-bracket look-alikes as ``<`` ``>``, one for one."""
    return neutralise(text).replace("\u2039", "<").replace("\u203a", ">")


def pattern_spans(item: CheckInput, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Every match of ``pattern`` in the text as written or in its fold, as text spans.

    Both views have angle-bracket look-alikes read as ``<`` ``>``. A match in the fold
    covers the characters it was folded from; an empty match has no characters and is
    left out.
    """
    written = _brackets(item.text)
    spans = {m.span() for m in pattern.finditer(written) if m.end() > m.start()}
    folded = item.folded
    view = _brackets(folded.text)
    # The patterns ignore case, so a fold that only lowered the case finds nothing new.
    if view != written and view != written.lower():
        spans.update(
            folded.covering_span(*m.span()) for m in pattern.finditer(view) if m.end() > m.start()
        )
    return sorted(spans)


def _findings(item: CheckInput, check: str, patterns: tuple[_Pattern, ...]) -> Iterator[Finding]:
    for reason, category, pattern in patterns:
        for start, end in pattern_spans(item, pattern):
            yield Finding(check, category, start, end, reason)


def heuristic_findings(item: CheckInput, check: str) -> Iterator[Finding]:
    """The findings of both checks' patterns in ``item``, reported as check ``check``.

    What the encoded-payload check runs on decoded text.
    """
    yield from _findings(item, check, _INJECTION_PATTERNS)
    yield from _findings(item, check, _JAILBREAK_PATTERNS)


def _overrides(item: CheckInput) -> Iterator[Finding]:
    return _findings(item, "instruction_override", _INJECTION_PATTERNS)


def _jailbreaks(item: CheckInput) -> Iterator[Finding]:
    return _findings(item, "jailbreak_persona", _JAILBREAK_PATTERNS)


INSTRUCTION_OVERRIDE = InputCheck(
    Manifest(
        id="instruction_override",
        detects='"ignore previous instructions" and kin, impersonated system/developer/'
        "assistant roles, forged chat-template and tool markers, notes to the AI, "
        "system-prompt extraction, data exfiltration orders",
        languages=("en", "zh-Hans", "zh-Hant"),
        kind=CheckKind.DETERMINISTIC,
        categories=frozenset({InputCategory.PROMPT_INJECTION}),
    ),
    _overrides,
)
"""Prompt-injection heuristics (see the module docstring)."""

JAILBREAK_PERSONA = InputCheck(
    Manifest(
        id="jailbreak_persona",
        detects='rule-free personas and modes (DAN, "do anything now", "no longer bound '
        'by", 越狱模式) and orders never to refuse',
        languages=("en", "zh-Hans", "zh-Hant"),
        kind=CheckKind.DETERMINISTIC,
        categories=frozenset({InputCategory.JAILBREAK}),
    ),
    _jailbreaks,
)
"""Jailbreak heuristics (see the module docstring)."""
