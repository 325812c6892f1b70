"""The message classes L0 missed before issue 35 (item 4), and the obfuscations it did not undo.

For each class, in English, Simplified and Traditional Chinese: sentences written for these
tests (not taken from any data set) that must escalate at L0, and controls that must not
(jokes, news about others, fiction, a pet's medicine, games, supporting a friend). Every
sentence that must escalate did not on the lexicon before this change.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.fold import has_lookalikes, normalise
from foureyes.risk.l0 import L0Gate

GATE = L0Gate.default()

ESCALATE: dict[str, dict[str, list[str]]] = {
    "acts_in_progress": {
        "en": [
            "I'm standing on the ledge of my building right now",
            "sitting on the edge of the roof, looking down",
            "I'm at the station, going to jump in front of the next train",
            "the rope is tied and the chair is ready",
            "I already swallowed a whole pack of paracetamol",
            "the gun is loaded and pointed at my head",
        ],
        "zh-Hans": [
            "我现在站在楼顶边上",
            "我坐在天台边上往下看",
            "我在铁轨上等火车",
            "绳子已经挂好了",
            "刚吞了一整盒药",
            "枪口对着自己",
        ],
        "zh-Hant": [
            "我現在坐在天台邊上",
            "已經站在樓頂邊了",
            "繩子已經掛好了",
            "我在鐵軌上等火車",
            "剛吃了一整盒藥",
            "槍口對著自己了",
        ],
    },
    "preparatory_acts": {
        "en": [
            "I gave my sister all my passwords and told her where my will is",
            "found a new home for my cat since I won't be around",
            "I'm giving away all my stuff, I won't need it anymore",
            "looked up how many pills it takes",
        ],
        "zh-Hans": [
            "药已经攒够了",
            "绝笔信写好了",
            "把所有密码都告诉我姐了，以后用不上了",
            "猫已经托付给朋友了，我走了以后它有人照顾",
            "我的东西都送人了，反正以后也用不上了",
            "查了吃多少片会死",
        ],
        "zh-Hant": [
            "藥已經攢夠了",
            "絕筆信寫好了",
            "把所有密碼都給我哥了，以後用不上了",
            "狗已經託付給鄰居，我走了以後牠有人照顧",
            "查了吃多少顆會死",
        ],
    },
    "farewell": {
        "en": [
            "this is my last message to you all",
            "tell my mom I love her and I'm sorry for everything",
            "goodbye forever, you won't hear from me again",
        ],
        "zh-Hans": [
            "这是我最后一次跟你们说话了",
            "以后替我照顾好我妈，告诉她我爱她",
            "谢谢这些年的照顾，我先走一步了",
            "来生再见吧",
            "大家永远再见",
        ],
        "zh-Hant": [
            "這是我最後一次跟你們說話了",
            "以後替我照顧好我爸，告訴他我愛他",
            "謝謝這些年的照顧，我先走一步了",
            "來生再見吧",
        ],
    },
    "burden": {
        "en": [
            "I'm nothing but a burden to everyone",
            "they'd all be happier if I wasn't around",
        ],
        "zh-Hans": [
            "我活着只会拖累家人",
            "没有我大家都会过得更好",
            "我就是个负担，谁都嫌我",
            "我只会给别人添麻烦，我消失了最好",
            "世界上少了我会更好",
        ],
        "zh-Hant": [
            "我活著只會拖累家人",
            "沒有我大家都會過得更好",
            "我就是個負擔",
            "我消失了最好",
        ],
    },
    "entrapment": {
        "en": [
            "there's no way out of this for me",
            "I'm trapped and there's no escape",
            "I don't see a way out of this",
            "I can't see any way out anymore",
        ],
        "zh-Hans": [
            "我被困住了，没有任何出路",
            "我已经走投无路了",
            "人生就是死胡同，看不到尽头",
            "这种痛苦无法忍受，永远不会结束",
        ],
        "zh-Hant": [
            "我被困住了，沒有任何出路",
            "我已經走投無路了",
            "人生就是死胡同，看不到盡頭",
        ],
    },
    "implicit_ideation": {
        "en": [
            "I hope I don't wake up tomorrow",
            "soon I won't be around anymore",
            "I just want to disappear and never come back",
            "I want to sleep forever",
            "I'm not going to be here much longer",
        ],
        "zh-Hans": [
            "真希望明天不要醒过来",
            "很快我就不在了",
            "想就这样睡过去再也不醒",
            "要是我从来没存在过就好了",
            "想从这个世界上消失",
        ],
        "zh-Hant": [
            "真希望明天不要醒過來",
            "很快我就不在了",
            "要是我從來沒存在過就好了",
            "想從這個世界上消失",
        ],
    },
    "self_harm": {
        "en": [
            "I started cutting again last night",
            "I carved into my arm with a razor",
            "the urge to cut is so strong tonight",
            "I burned my arm with a lighter on purpose",
            "my wrists are covered in fresh cuts",
        ],
        "zh-Hans": [
            "我又忍不住割了",
            "我用打火机烫自己",
            "我拿头撞墙撞到流血",
            "我把自己的手臂抓到流血",
        ],
        "zh-Hant": [
            "我又忍不住割了",
            "我用打火機燙自己",
            "我拿頭撞牆撞到流血",
        ],
    },
}

# Controls: the same words about something else. Fewer where the class is ambiguous.
CONTROLS: dict[str, dict[str, list[str]]] = {
    "acts_in_progress": {
        "en": [
            "we stood on the roof to watch the fireworks",
            "my dog took his pills this morning, the vet says he's better",
            "the train was late so I missed the meeting",
            "news: a man was talked down from a building downtown",
        ],
        "zh-Hans": ["我们站在楼顶看烟花", "猫的药我已经喂完了", "小说里主角在天台上看日落"],
        "zh-Hant": ["我們站在樓頂看煙火", "貓的藥我已經餵完了"],
    },
    "preparatory_acts": {
        "en": [
            "my grandma gave away all my old toys to charity",
            "we need to find a new home for my cat, my landlord said no pets",
            "the vet gave my dog pills for his ear",
        ],
        "zh-Hans": ["我把旧衣服都送人了", "给狗狗吃了驱虫药", "帮朋友记一下新密码"],
        "zh-Hant": ["我把舊衣服都送人了", "給狗狗吃了驅蟲藥"],
    },
    "farewell": {
        "en": [
            "the band played their final show and said goodbye to the fans",
            "thank you for everything, coach, see you next season",
        ],
        "zh-Hans": ["我先走一步了，你们慢慢吃", "毕业了，和同学们说再见"],
        "zh-Hant": ["我先走一步了，你們慢慢吃"],
    },
    "burden": {
        "en": [
            "the team would be better off without that rule",
            "my friend keeps saying she's a burden, how can I help her?",
        ],
        "zh-Hans": ["作业负担太重了", "我朋友总说自己是累赘，我该怎么安慰她"],
        "zh-Hant": ["作業負擔太重了"],
    },
    "entrapment": {
        "en": [
            "we got trapped in the elevator for an hour",
            "in the escape room there was no way out for twenty minutes",
        ],
        "zh-Hans": ["电梯坏了，我们被困住了半小时", "这个游戏关卡走投无路"],
        "zh-Hant": ["電梯壞了，我們被困住了半小時"],
    },
    "implicit_ideation": {
        "en": [
            "I won't be around this weekend, I'm visiting my parents",
            "I could sleep forever after that shift",
        ],
        "zh-Hans": ["今天好累，想睡到自然醒", "周末想从朋友圈消失几天"],
        "zh-Hant": ["今天好累，想睡到自然醒"],
    },
    "self_harm": {
        "en": [
            "I cut my finger while cooking",
            "my friend told me she's been scratching her arms until they bleed, how do I help",
        ],
        "zh-Hans": ["切菜时不小心划到手了", "掐自己一下看是不是做梦"],
        "zh-Hant": ["切菜時不小心劃到手了"],
    },
}


def _cases(table: dict[str, dict[str, list[str]]]) -> list[tuple[str, str, str]]:
    return [
        (cls, lang, text)
        for cls, by_lang in table.items()
        for lang, texts in by_lang.items()
        for text in texts
    ]


@pytest.mark.parametrize(("cls", "lang", "text"), _cases(ESCALATE))
def test_class_sentence_escalates(cls: str, lang: str, text: str) -> None:
    assert GATE.scan(text).escalate, (cls, lang, text)


@pytest.mark.parametrize(("cls", "lang", "text"), _cases(CONTROLS))
def test_class_control_does_not_escalate(cls: str, lang: str, text: str) -> None:
    assert not GATE.scan(text).escalate, (cls, lang, text)


def test_every_class_has_sentences_in_each_language() -> None:
    for table in (ESCALATE, CONTROLS):
        for cls, by_lang in table.items():
            assert set(by_lang) == {"en", "zh-Hans", "zh-Hant"}, cls
            assert all(by_lang.values()), cls


# Obfuscations the fold or the compiled variants did not undo before: leetspeak and digits
# for letters, dotted or spaced letters (with look-alikes in them), typing slips, emoji
# standing for a means, homophones of another tone, pinyin mixed with characters, the
# pinyin of a character written with its tone marks, and the initials of a four-character
# term.
OBFUSCATED: dict[str, list[str]] = {
    "en": [
        "i want to k1ll mys3lf",
        "thinking about su1c1de again",
        "ready to end my l1fe",
        "k.i.l.l m.y.s.e.l.f",
        "s.u.i.c.i.d.e is all i think about",
        "i'm gonna k 1 l l myself",
        "i feel so sucidal tonight",
        "thinking about suicde",
        "took all my 💊",
        "i have a bottle of 💊 ready",
    ],
    "zh-Hans": [
        "我把💊都吃了",
        "我想子杀",
        "真的好想zi杀",
        "准备zi杀了",
        "好想si",
        "我想 zì shā",
        "真想ylbl",
    ],
    "zh-Hant": [
        "我把💊全吃了",
        "我想子殺",
        "準備zi殺了",
        "真想ylbl",
    ],
}
OBFUSCATED_CONTROLS: dict[str, list[str]] = {
    "en": [
        "meet me on the 1st at 5am, bring the mp3 player",
        "u.s.a. vs. u.k. tonight, who wins?",
        "the vet said my cat needs two 💊 a day",
        "i am overdoing it at work",
    ],
    "zh-Hans": ["我们一起思考这个问题", "小狗每天吃一颗💊"],
    "zh-Hant": ["我們一起思考這個問題"],
}


@pytest.mark.parametrize(
    ("lang", "text"), [(lang, t) for lang, texts in OBFUSCATED.items() for t in texts]
)
def test_obfuscated_sentence_escalates_on_the_lexicon(lang: str, text: str) -> None:
    result = GATE.scan(text)
    assert result.escalate and result.score >= 1, (lang, text)
    assert all(text[m.start : m.end] for m in result.matches)


@pytest.mark.parametrize(
    ("lang", "text"), [(lang, t) for lang, texts in OBFUSCATED_CONTROLS.items() for t in texts]
)
def test_obfuscation_controls_do_not_escalate_on_the_lexicon(lang: str, text: str) -> None:
    assert GATE.scan(text).score < 1, (lang, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab kil1l30$!.@ 5am想死💊ì")))
def test_the_lookalike_hint_misses_nothing_the_fold_would_change(text: str) -> None:
    # L0 folds look-alikes only when has_lookalikes says the fold can change something.
    plain = normalise(text)
    lookalike = normalise(text, lookalikes=True)
    if not has_lookalikes(plain.text, text):
        assert lookalike.text == plain.text
    origins = [lookalike.origin(q) for q in range(len(lookalike.text))]
    assert all(0 <= o < len(text) for o in origins)
    assert origins == sorted(origins)


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("k1ll mys3lf", "kill myself"),
        ("pi11s", "pills"),
        ("$uicide", "suicide"),
        ("k.i.l.l", "kill"),
        ("k 1 l l", "kill"),
        ("took my 💊", "took my pills"),
        ("吞了💊", "吞了药"),
        ("zì shā", "zi sha"),
        # Not look-alikes: numbers, ordinals, units, sentence punctuation, abbreviations.
        ("meet at 5am on the 1st", "meet at 5am on the 1st"),
        ("mp3 b4 20yearold", "mp3 b4 20yearold"),
        ("great!!", "great!!"),
        ("e.g. this", "e.g. this"),
    ],
)
def test_the_lookalike_fold(text: str, folded: str) -> None:
    assert normalise(text, lookalikes=True).text.strip() == folded
