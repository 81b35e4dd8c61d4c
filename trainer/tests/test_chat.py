"""Formatting conversations and masking the loss, with a character-level
stand-in tokenizer so that every expected id can be worked out by hand:
special tokens have ids 0-4 and any other character c has id 100 + ord(c)."""

import re
import unittest

from curate_trainer.chat import IGNORE, ChatFormat
from curate_trainer.data import Message

SPECIAL = {"<pad>": 0, "<s>": 1, "</s>": 2, "<|im_start|>": 3, "<|im_end|>": 4}
SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL) + ")")


def chars(text):
    return [100 + ord(c) for c in text]


class CharTokenizer:
    chat_template = None
    bos_token, eos_token, pad_token = "<s>", "</s>", "<pad>"
    bos_token_id, eos_token_id, pad_token_id = 1, 2, 0

    def __call__(self, text, add_special_tokens=False):
        ids = []
        for piece in SPLIT.split(text):
            ids += [SPECIAL[piece]] if piece in SPECIAL else chars(piece)
        return {"input_ids": ids}


class ChatMLTokenizer(CharTokenizer):
    """Renders <|im_start|>role\\ncontent<|im_end|>\\n per message."""
    chat_template = "chatml"
    eos_token, eos_token_id = "<|im_end|>", 4

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert tokenize is False
        text = "".join(f"<|im_start|>{m['role']}\n{self.content(messages, i)}<|im_end|>\n"
                       for i, m in enumerate(messages))
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def content(self, messages, i):
        return messages[i]["content"]


class ReasoningTokenizer(ChatMLTokenizer):
    """Like templates that show an empty reasoning block on the final reply only."""

    def content(self, messages, i):
        last = i == len(messages) - 1 and messages[i]["role"] == "assistant"
        return ("<think></think>" if last else "") + messages[i]["content"]


def conv(*pairs, weights=None):
    weights = weights or {}
    return tuple(Message(role, content, weights.get(i, 1)) for i, (role, content) in enumerate(pairs))


def trained(ids, labels):
    return [t for t, label in zip(ids, labels) if label != IGNORE]


class PlainLayoutTest(unittest.TestCase):
    fmt = ChatFormat(CharTokenizer())
    msgs = conv(("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"))

    def test_render(self):
        self.assertFalse(self.fmt.uses_template)
        self.assertEqual(self.fmt.render(self.msgs), "system: Be brief.\nuser: Hi\nassistant: Hello</s>")
        self.assertEqual(self.fmt.render(self.msgs[1:2], add_generation_prompt=True), "user: Hi\nassistant: ")

    def test_segments(self):
        self.assertEqual(self.fmt.segments(self.msgs), [
            ("system: Be brief.\nuser: Hi\nassistant: ", False),
            ("Hello</s>", True),
        ])

    def test_encode_chat_trains_only_the_reply(self):
        ids, labels = self.fmt.encode_chat(self.msgs, max_length=100)
        # BOS, then the 38 characters before the reply, then "Hello" and EOS.
        self.assertEqual(ids[0], 1)
        self.assertEqual(len(ids), 1 + 38 + 5 + 1)
        self.assertEqual(labels[:39], [IGNORE] * 39)
        self.assertEqual(labels[39:], [172, 201, 208, 208, 211, 2])

    def test_weight_zero_reply_is_context(self):
        msgs = conv(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"), weights={1: 0})
        self.assertEqual(self.fmt.segments(msgs), [
            ("user: a\nassistant: ", False), ("b</s>", False), ("\nuser: c\nassistant: ", False), ("d</s>", True),
        ])
        ids, labels = self.fmt.encode_chat(msgs, 100)
        self.assertEqual(trained(ids, labels), [200, 2])  # "d", EOS

    def test_cut_to_max_length(self):
        # BOS + 38 prefix characters fill 39 positions: nothing of the reply is left.
        self.assertIsNone(self.fmt.encode_chat(self.msgs, 39))
        ids, labels = self.fmt.encode_chat(self.msgs, 41)
        self.assertEqual(len(ids), 41)
        self.assertEqual(trained(ids, labels), [172, 201])  # "He"

    def test_encode_pair(self):
        ids, labels = self.fmt.encode_pair(conv(("user", "Hi")), conv(("assistant", "Yo")), 100)
        self.assertEqual(ids, [1] + chars("user: Hi\nassistant: ") + [189, 211, 2])
        self.assertEqual(labels, [IGNORE] * 21 + [189, 211, 2])

    def test_encode_pair_cuts_the_oldest_prompt_tokens(self):
        # Prompt: BOS + "user: abcdefghij\nassistant: " = 29 tokens; reply "xyz" + EOS = 4.
        ids, labels = self.fmt.encode_pair(conv(("user", "abcdefghij")), conv(("assistant", "xyz")), 16)
        self.assertEqual(ids, chars("\nassistant: xyz") + [2])
        self.assertEqual(trained(ids, labels), chars("xyz") + [2])

    def test_encode_pair_keeps_half_for_a_long_reply(self):
        # A 21-token reply keeps max(16 - 29, 16 // 2) = 8 tokens; the prompt its last 8.
        ids, labels = self.fmt.encode_pair(conv(("user", "abcdefghij")),
                                           conv(("assistant", "0123456789ABCDEFGHIJ")), 16)
        self.assertEqual(ids, chars("istant: 01234567"))
        self.assertEqual(labels, [IGNORE] * 8 + chars("01234567"))

    def test_encode_prompt_keeps_the_newest_tokens(self):
        self.assertEqual(self.fmt.encode_prompt(conv(("user", "Hi")), 100), [1] + chars("user: Hi\nassistant: "))
        self.assertEqual(self.fmt.encode_prompt(conv(("user", "Hi")), 5), chars("ant: "))


class TemplateTest(unittest.TestCase):
    def test_chat_template_segments(self):
        fmt = ChatFormat(ChatMLTokenizer())
        self.assertTrue(fmt.uses_template)
        msgs = conv(("user", "Hi"), ("assistant", "Hello"))
        self.assertEqual(fmt.segments(msgs), [
            ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", False),
            ("Hello<|im_end|>\n", True),
        ])
        ids, labels = fmt.encode_chat(msgs, 100)
        self.assertEqual(ids[0], 3)  # no BOS added: the template writes its own start
        self.assertEqual(trained(ids, labels), chars("Hello") + [4, 110])

    def test_template_that_rewrites_earlier_turns(self):
        fmt = ChatFormat(ReasoningTokenizer())
        msgs = conv(("user", "Q one"), ("assistant", "Sure thing"), ("user", "Q two"), ("assistant", "Done now"))
        full = fmt.render(msgs)
        pieces = fmt.segments(msgs)
        self.assertEqual("".join(text for text, _ in pieces), full)
        self.assertEqual([text for text, train in pieces if train], ["Sure thing<|im_end|>", "Done now<|im_end|>"])
        self.assertIn(("\n<|im_start|>user\nQ two<|im_end|>\n<|im_start|>assistant\n<think></think>", False), pieces)

    def test_completion_text(self):
        fmt = ChatFormat(ChatMLTokenizer())
        before, reply = fmt.completion_text(conv(("user", "Hi")), conv(("assistant", "Yo")))
        self.assertEqual(before, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        self.assertEqual(reply, "Yo<|im_end|>\n")


if __name__ == "__main__":
    unittest.main()
