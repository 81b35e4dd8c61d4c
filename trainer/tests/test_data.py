"""Reading the data files, the model directory checks, and the LFS-pointer
and missing-path errors."""

import json
import tempfile
import unittest
from pathlib import Path

import publicdata
from curate_trainer import data, paths
from curate_trainer.errors import DataError, TrainerError

TESTDATA = Path(__file__).resolve().parent / "testdata"
LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")


class TempDir(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, lines):
        path = self.dir / name
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                        encoding="utf-8")
        return path


def msg(role, content, **extra):
    return {"role": role, "content": content, **extra}


class ChatDataTest(TempDir):
    def test_openai_chat_lines(self):
        path = self.write("train.jsonl", [
            {"messages": [msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hello")]},
            "",
            {"messages": [msg("user", [{"type": "text", "text": "Two "}, {"type": "text", "text": "parts"}]),
                          msg("assistant", "ok", weight=1)]},
        ])
        examples = data.read_examples(path, data.parse_chat)
        self.assertEqual(len(examples), 2)
        self.assertEqual(examples[0].messages[2], data.Message("assistant", "Hello"))
        self.assertEqual(examples[0].line, 1)
        self.assertEqual(examples[1].messages[0].content, "Two parts")
        self.assertEqual(examples[1].line, 3)  # the blank line 2 is skipped but counted

    def test_preference_line_trains_on_chosen(self):
        path = self.write("train.jsonl", [
            {"prompt": [msg("user", "Q")], "chosen": [msg("assistant", "good")], "rejected": [msg("assistant", "bad")]},
        ])
        [example] = data.read_examples(path, data.parse_chat)
        self.assertEqual([m.content for m in example.messages], ["Q", "good"])

    def test_bad_lines_are_named(self):
        path = self.write("train.jsonl", [
            {"messages": [msg("user", "Hi"), msg("assistant", "Hello")]},
            "{not json",
            {"messages": [msg("robot", "beep"), msg("assistant", "x")]},
            {"messages": [msg("user", "Hi")]},
            {"messages": [msg("user", "Hi"), {"role": "assistant"}]},
            {"messages": [msg("user", "Hi"), msg("assistant", "x", tool_calls=[])]},
            {"text": "plain"},
            "[1, 2]",
            {"messages": [msg("user", "Hi", weight=0), msg("assistant", "x")]},
        ])
        with self.assertRaises(DataError) as ctx:
            data.read_examples(path, data.parse_chat)
        self.assertEqual(ctx.exception.problems, [
            "line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
            "line 3: messages[0].role: must be one of system, user, assistant, got 'robot'",
            "line 4: messages: needs at least one non-empty assistant message to train on",
            "line 5: messages[1].content: is missing",
            "line 6: messages[1]: unsupported key 'tool_calls' (allowed: role, content, name, weight)",
            'line 7: messages: is missing (expected {"messages": [...]})',
            "line 8: must be a JSON object",
            "line 9: messages[0].weight: only assistant messages can have weight 0",
        ])
        self.assertTrue(str(ctx.exception).startswith(str(path) + ": line 2:"))

    def test_many_bad_lines_are_summarised(self):
        path = self.write("train.jsonl", ["{}"] * 25)
        with self.assertRaises(DataError) as ctx:
            data.read_examples(path, data.parse_chat)
        self.assertEqual(len(ctx.exception.problems), 20)
        self.assertTrue(str(ctx.exception).endswith("; and 5 more"))

    def test_invalid_utf8_and_empty_file(self):
        path = self.dir / "train.jsonl"
        path.write_bytes(b'{"messages": "\xff"}\n')
        with self.assertRaisesRegex(DataError, "line 1: not valid UTF-8"):
            data.read_examples(path, data.parse_chat)
        empty = self.write("empty.jsonl", [])
        with self.assertRaisesRegex(DataError, "no examples"):
            data.read_examples(empty, data.parse_chat)
        self.assertEqual(data.read_examples(empty, data.parse_chat, "eval_file", required=False), [])

    def test_chat_fixture(self):
        # testdata/chat.jsonl, written for this test as Curate exports chats:
        # a system prompt, a turn kept out of training (weight 0), a blank
        # line, a named user whose content comes in text parts.
        first, second, third = data.read_examples(TESTDATA / "chat.jsonl", data.parse_chat)
        self.assertEqual([m.role for m in first.messages], ["system", "user", "assistant"])
        self.assertEqual(first.messages[2].content,
                         "Open Settings, choose Sharing and add your colleague's e-mail address.")
        self.assertEqual(second.messages[1], data.Message("assistant", "Which room would you like?", weight=0))
        self.assertEqual(second.messages[3].weight, 1)
        self.assertEqual(third.messages[0], data.Message("user", "Wie ändere ich meine Zeitzone?"))
        self.assertEqual([ex.line for ex in (first, second, third)], [1, 2, 4])

    def test_openai_cookbook_file(self):
        # OpenAI's toy file (public data): five valid chat examples, one of
        # them very long.
        path = publicdata.path("openai-cookbook", "toy_chat_fine_tuning.jsonl")
        examples = data.read_examples(path, data.parse_chat)
        self.assertEqual(len(examples), 5)
        self.assertTrue(all(ex.messages[-1].role == "assistant" for ex in examples))


class PreferenceDataTest(TempDir):
    def test_preference_fixture(self):
        # testdata/preference.jsonl, written for this test: TRL's
        # conversational form with ratings, and its plain-string form.
        rated, plain = data.read_examples(TESTDATA / "preference.jsonl", data.parse_preference)
        self.assertEqual(rated.prompt, (data.Message("system", "Answer briefly."),
                                        data.Message("user", "How do I move a meeting?")))
        self.assertEqual(rated.chosen, (data.Message("assistant", "Drag it to the new time."),))
        self.assertEqual(rated.rejected, (data.Message("assistant", "Meetings cannot be moved."),))
        self.assertEqual((rated.rating_chosen, rated.rating_rejected), (5.0, 2.0))
        self.assertEqual(plain.prompt, (data.Message("user", "Is there a dark mode?"),))
        self.assertEqual(plain.rejected, (data.Message("assistant", "No."),))
        self.assertIsNone(plain.rating_chosen)

    def test_conversational_and_plain_forms(self):
        path = self.write("train.jsonl", [
            {"prompt": [msg("system", "S"), msg("user", "Q")], "chosen": [msg("assistant", "A")],
             "rejected": [msg("assistant", "B")], "rating_chosen": 5, "rating_rejected": 1.5},
            {"prompt": "Q2", "chosen": "good", "rejected": "bad"},
        ])
        first, second = data.read_examples(path, data.parse_preference)
        self.assertEqual(first.prompt, (data.Message("system", "S"), data.Message("user", "Q")))
        self.assertEqual((first.rating_chosen, first.rating_rejected), (5.0, 1.5))
        self.assertEqual(second.prompt, (data.Message("user", "Q2"),))
        self.assertEqual(second.chosen, (data.Message("assistant", "good"),))
        self.assertIsNone(second.rating_chosen)

    def test_bad_preference_lines(self):
        good = {"prompt": [msg("user", "Q")], "chosen": [msg("assistant", "A")], "rejected": [msg("assistant", "B")]}
        path = self.write("train.jsonl", [
            {k: v for k, v in good.items() if k != "rejected"},
            {**good, "chosen": [msg("user", "A")]},
            {**good, "rejected": [msg("assistant", "  ")]},
            {**good, "rating_chosen": 6},
            {**good, "prompt": [msg("assistant", "hi")]},
            {**good, "prompt": []},
        ])
        with self.assertRaises(DataError) as ctx:
            data.read_examples(path, data.parse_preference)
        self.assertEqual(ctx.exception.problems, [
            "line 1: rejected: is missing",
            "line 2: chosen[0].role: must be assistant, got 'user'",
            "line 3: rejected: the reply is empty",
            "line 4: rating_chosen: must be a number from 1 to 5, got 6",
            "line 5: prompt: needs at least one user message",
            "line 6: prompt: must not be empty",
        ])


class PromptDataTest(TempDir):
    def test_prompt_shapes(self):
        path = self.write("train.jsonl", [
            {"prompt": [msg("user", "How do I reset it?")], "context": "Hold the button."},
            {"prompt": [msg("user", "Q")], "context": ["doc one", "doc two"]},
            {"prompt": [msg("user", "Q3")], "chosen": [msg("assistant", "A")], "rejected": [msg("assistant", "B")]},
            {"messages": [msg("user", "first"), msg("assistant", "a1"), msg("user", "second"), msg("assistant", "a2")]},
        ])
        a, b, c, d = data.read_examples(path, data.parse_prompt)
        self.assertEqual((a.query, a.context), ("How do I reset it?", "Hold the button."))
        self.assertEqual(b.context, "doc one\n\ndoc two")
        self.assertEqual((c.query, c.context), ("Q3", ""))
        self.assertEqual([m.content for m in d.prompt], ["first", "a1", "second"])
        self.assertEqual(d.query, "second")

    def test_bad_context(self):
        path = self.write("train.jsonl", [{"prompt": [msg("user", "Q")], "context": {"doc": 1}}])
        with self.assertRaisesRegex(DataError, "line 1: context: must be a string or a list of strings"):
            data.read_examples(path, data.parse_prompt)


class PathsTest(TempDir):
    def model_dir(self, name="model"):
        path = self.dir / name
        path.mkdir()
        (path / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
        (path / "model.safetensors").write_bytes(b"\0" * 4096)
        return path

    def test_good_model_dir(self):
        path = self.model_dir()
        self.assertEqual(paths.check_model_dir(path, "base_model"), path)

    def test_missing_model_dir(self):
        with self.assertRaises(TrainerError) as ctx:
            paths.check_model_dir(self.dir / "Qwen2.5-0.5B", "base_model")
        self.assertEqual(str(ctx.exception),
                         f"base_model: {self.dir / 'Qwen2.5-0.5B'} does not exist (the trainer reads models "
                         "from local directories only and never downloads)")

    def test_broken_link(self):
        link = self.dir / "link"
        link.symlink_to(self.dir / "gone")
        with self.assertRaisesRegex(TrainerError, "base_model: .*link is a broken symbolic link"):
            paths.check_model_dir(link, "base_model")

    def test_not_a_model(self):
        (self.dir / "file").write_text("x")
        with self.assertRaisesRegex(TrainerError, "base_model: .*file is not a directory"):
            paths.check_model_dir(self.dir / "file", "base_model")
        empty = self.dir / "empty"
        empty.mkdir()
        with self.assertRaisesRegex(TrainerError, "has no config.json"):
            paths.check_model_dir(empty, "base_model")
        adapter = self.dir / "adapter"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text("{}")
        with self.assertRaisesRegex(TrainerError, "irs.reward_model: .*holds a PEFT adapter, not a full model"):
            paths.check_model_dir(adapter, "irs.reward_model")
        no_weights = self.dir / "no_weights"
        no_weights.mkdir()
        (no_weights / "config.json").write_text("{}")
        with self.assertRaisesRegex(TrainerError, r"has no weight files \(\*.safetensors or \*.bin\)"):
            paths.check_model_dir(no_weights, "base_model")

    def test_lfs_pointers(self):
        path = self.model_dir()
        (path / "model.safetensors").write_bytes(LFS_POINTER)
        with self.assertRaises(TrainerError) as ctx:
            paths.check_model_dir(path, "base_model")
        self.assertEqual(str(ctx.exception),
                         f"base_model: model.safetensors in {path} is a Git LFS pointer, not the file itself; "
                         "run `git lfs pull` in that directory")
        (path / "tokenizer.json").write_bytes(LFS_POINTER)
        with self.assertRaisesRegex(TrainerError, "model.safetensors, tokenizer.json in .* are Git LFS pointers"):
            paths.check_model_dir(path, "base_model")

    def test_lfs_detection(self):
        pointer = self.dir / "p"
        pointer.write_bytes(LFS_POINTER)
        self.assertTrue(paths.is_lfs_pointer(pointer))
        big = self.dir / "big"
        big.write_bytes(LFS_POINTER + b"\0" * 2000)  # starts alike but too large to be a pointer
        self.assertFalse(paths.is_lfs_pointer(big))
        self.assertFalse(paths.is_lfs_pointer(self.dir / "missing"))

    def test_data_file_errors(self):
        with self.assertRaisesRegex(TrainerError, "train_file: .*train.jsonl does not exist"):
            data.read_examples(self.dir / "train.jsonl", data.parse_chat)
        (self.dir / "sub").mkdir()
        with self.assertRaisesRegex(TrainerError, "eval_file: .*sub is not a regular file"):
            data.read_examples(self.dir / "sub", data.parse_chat, "eval_file")
        pointer = self.dir / "train.jsonl"
        pointer.write_bytes(LFS_POINTER)
        with self.assertRaisesRegex(TrainerError, "train_file: .*train.jsonl is a Git LFS pointer, not the data itself"):
            data.read_examples(pointer, data.parse_chat)


if __name__ == "__main__":
    unittest.main()
