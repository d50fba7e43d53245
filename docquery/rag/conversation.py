"""Follow-up questions in context: which question retrieval and the answer use.

History is caller-supplied text, exactly like the question: it is bounded, never logged, never
placed inside the prompt's data fence, and it never touches the ACL (that comes from the verified
principal only). Two ways to turn a follow-up ("and where do I book it?") into a question:

* with an LLM, a condense prompt (no sources, no fence) asks for a standalone rewrite;
* without one (extractive), the follow-up is joined to the earlier user turn it continues, but
  only when it does not stand on its own (``needs_context``): a complete question, or a new
  topic, is searched as asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from docquery.core.domain import Prompt

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


@dataclass(frozen=True)
class ConversationConfig:
    # No defaults: the values (and their reasons) live in settings.ConversationSettings.
    max_turns: int
    max_chars: int
    max_question_chars: int  # a rewrite longer than a question may be is not used


def bounded(history: Sequence[Turn], cfg: ConversationConfig) -> list[Turn]:
    """The most recent turns within ``max_turns`` and ``max_chars`` (oldest dropped first)."""
    out: list[Turn] = []
    used = 0
    for turn in reversed(history[-cfg.max_turns :] if cfg.max_turns else []):
        text = turn.content.strip()
        if not text:
            continue
        if used + len(text) > cfg.max_chars:
            break
        used += len(text)
        out.append(Turn(turn.role, text))
    return out[::-1]


# Words that carry no topic of their own: a question made only of these (and cues) needs context.
_FUNCTION_WORDS = frozenset(
    re.findall(
        r"\S+",
        """a an the and or but so then also too of to in on at for from by with about as into than
        is are was were be been being am do does did done have has had can could will would shall should
        may might must i me my we our you your what which who whom whose when where why how there here
        not no yes please tell say more else other another way ways any some much many""",
    )
)
# Words that point back at something said before.
_ANAPHORA = frozenset(
    re.findall(r"\S+", "it its it's itself they them their theirs this that these those one ones he she him her")
)
# Openings that continue the previous question.
_CONTINUATION = re.compile(r"^\s*(and|also|or|but|then|so|what about|how about|and what|what else|same)\b", re.I)
_WORDS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def needs_context(question: str) -> bool:
    """Whether a follow-up does not stand on its own (the extractive rule; documented in docs/api.md).

    True when it opens with a continuation ("and ...", "what about ..."), or has fewer than two
    topic words, or refers back with a pronoun ("it", "they", "that") and has fewer than four.
    """
    words = [w.lower() for w in _WORDS.findall(question)]
    topic = [w for w in words if w not in _FUNCTION_WORDS and w not in _ANAPHORA and len(w) > 2]
    if _CONTINUATION.match(question) or len(topic) < 2:
        return True
    return any(w in _ANAPHORA for w in words) and len(topic) < 4


def extractive_query(question: str, history: Sequence[Turn]) -> str:
    """The text to search for: the follow-up, plus the user turns back to the one that stands alone."""
    if not needs_context(question):
        return question
    earlier: list[str] = []
    for turn in reversed(history):
        if turn.role != "user":
            continue  # our own answers are not the caller's topic
        earlier.append(turn.content)
        if not needs_context(turn.content):
            break
    return "\n".join([*reversed(earlier), question]) if earlier else question


CONDENSE_SYSTEM = (
    "You rewrite the last question of a conversation so that it can be understood without the "
    "conversation. Keep its meaning and language; resolve words like 'it' or 'there' from the "
    "earlier turns. If it already stands on its own, or starts a new topic, return it unchanged. "
    "Reply with the question only: no answer, no explanation, no quotes."
)


def condense_prompt(question: str, history: Sequence[Turn]) -> Prompt:
    """A prompt with no sources (so no data fence): the conversation and the question to rewrite."""
    lines = [f"{'User' if t.role == 'user' else 'Assistant'}: {_one_line(t.content)}" for t in history]
    user = "Conversation:\n" + "\n".join(lines) + f"\n\nLast question: {_one_line(question)}\n\nStandalone question:"
    return Prompt(
        question=question,
        sources=(),
        messages=({"role": "system", "content": CONDENSE_SYSTEM}, {"role": "user", "content": user}),
    )


def rewritten_or_original(reply: str, question: str, max_chars: int) -> str:
    """The LLM's rewrite, if it is a usable question; otherwise the question as asked."""
    text = _one_line(reply).strip().strip("\"'“”").strip()
    if not text or len(text) > max_chars:
        return question
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())
