#!/usr/bin/env python3
"""mstar-serve against clients nobody here wrote: the official `openai`
package (completions and chat, streaming and not, n > 1, stop strings, error
statuses and bodies; chat with image parts on the tiny Qwen3.5 fixture, whose
greedy tokens are transformers') and curl (SSE framing and headers).

    python client_test.py --server build/launcher/mstar-serve [--model DIR]

Starts its own servers on free loopback ports and stops them; every request
has a timeout. Exits non-zero on any failure.
"""
import argparse
import base64
import json
import pathlib
import re
import subprocess
import sys
import time
import unittest

import openai

ARGS = None
FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


class Server:
    """mstar-serve on a free port, read from its start-up log."""

    def __init__(self, *extra, model=None):
        cmd = [ARGS.server, "--port", "0", "--max-model-len", "512"] + list(extra)
        if model or ARGS.model:
            cmd += ["--model", model or ARGS.model]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.log = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving on (http://[\d.]+:\d+)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.kill()
        raise RuntimeError("mstar-serve did not start:\n" + "".join(self.log))

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=60)

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.proc.stderr.close()
        return rc


class OpenAIClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.c = cls.server.client()
        cls.model = cls.c.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "mstar-serve should exit 0 on SIGTERM"

    def greedy(self, prompt, n_tokens, **kw):
        return self.c.completions.create(model=self.model, prompt=prompt, max_tokens=n_tokens,
                                         temperature=0, extra_body={"ignore_eos": True}, **kw)

    def test_completion_and_its_stream_agree(self):
        r = self.greedy("The quick brown fox", 24)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(len(r.choices), 1)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 24)
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 24)
        chunks = list(self.greedy("The quick brown fox", 24, stream=True,
                                  stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
        self.assertEqual(text, r.choices[0].text)
        self.assertEqual(chunks[-1].usage.completion_tokens, 24)
        self.assertEqual([ch.choices[0].finish_reason for ch in chunks if ch.choices][-1], "length")

    def test_token_ids_come_back_with_return_token_ids(self):
        r = self.c.completions.create(model=self.model, prompt=[10, 20, 30], max_tokens=5,
                                      temperature=0, extra_body={"ignore_eos": True,
                                                                 "return_token_ids": True})
        body = r.model_dump()
        self.assertEqual(body["prompt_token_ids"], [10, 20, 30])
        self.assertEqual(len(body["choices"][0]["token_ids"]), 5)

    def test_n_samples_and_prompt_lists(self):
        r = self.c.completions.create(model=self.model, prompt=["Hello", "Goodbye"], n=3,
                                      max_tokens=6, temperature=1.0, seed=3,
                                      extra_body={"ignore_eos": True})
        self.assertEqual(sorted(ch.index for ch in r.choices), list(range(6)))
        self.assertEqual(r.usage.completion_tokens, 36)
        again = self.c.completions.create(model=self.model, prompt=["Hello", "Goodbye"], n=3,
                                          max_tokens=6, temperature=1.0, seed=3,
                                          extra_body={"ignore_eos": True})
        self.assertEqual([c.text for c in r.choices], [c.text for c in again.choices],
                         "a seed fixes the draws")

    def test_stop_string_ends_the_text_before_it(self):
        full = self.greedy("Once upon a time", 40).choices[0].text
        stop = full[10:13]
        self.assertTrue(stop.strip(), "the greedy text has a usable middle: %r" % full)
        r = self.c.completions.create(model=self.model, prompt="Once upon a time", max_tokens=40,
                                      temperature=0, stop=[stop])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].text, full[:full.find(stop)])

    def test_logprobs(self):
        r = self.c.completions.create(model=self.model, prompt="Hello", max_tokens=4,
                                      temperature=0, logprobs=2, extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 4)
        # Alternatives whose text is the same (a cut UTF-8 byte) share one key.
        self.assertTrue(1 <= len(lp.top_logprobs[0]) <= 2)
        self.assertTrue(all(v <= 0 for v in lp.token_logprobs))

    def test_chat_and_its_stream_agree(self):
        msgs = [{"role": "user", "content": "Tell me about the sea."}]
        r = self.c.chat.completions.create(model=self.model, messages=msgs, max_tokens=20,
                                           temperature=0, extra_body={"ignore_eos": True})
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.usage.completion_tokens, 20)
        stream = self.c.chat.completions.create(model=self.model, messages=msgs, max_tokens=20,
                                                temperature=0, stream=True,
                                                extra_body={"ignore_eos": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        self.assertEqual(text, r.choices[0].message.content)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "length")
        n = self.c.chat.completions.create(model=self.model, messages=msgs, max_tokens=4, n=2,
                                           temperature=0.8, seed=1)
        self.assertEqual(len(n.choices), 2)

    def test_errors_are_openai_errors(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.c.completions.create(model=self.model, prompt="x", max_tokens=100000)
        self.assertEqual(e.exception.status_code, 400)
        self.assertEqual(e.exception.body["param"], "max_tokens")
        with self.assertRaises(openai.BadRequestError) as e:
            self.c.completions.create(model="no-such-model", prompt="x", max_tokens=2)
        self.assertEqual(e.exception.body["code"], "model_not_found")
        with self.assertRaises(openai.BadRequestError):
            self.c.completions.create(model=self.model, prompt="", max_tokens=2)
        with self.assertRaises(openai.BadRequestError):
            self.c.completions.create(model=self.model, prompt="x" * 600, max_tokens=2)
        with self.assertRaises(openai.BadRequestError) as e:
            self.c.chat.completions.create(model=self.model, messages=[], max_tokens=2)
        self.assertEqual(e.exception.body["param"], "messages")
        with self.assertRaises(openai.BadRequestError) as e:
            self.c.completions.create(model=self.model, prompt="x", temperature=-1)
        self.assertEqual(e.exception.body["param"], "temperature")


def data_url(name):
    kind = "png" if name.endswith(".png") else "jpeg"
    data = base64.b64encode((FIXTURES / "images" / name).read_bytes()).decode()
    return f"data:image/{kind};base64,{data}"


class Images(unittest.TestCase):
    """Chat with image_url parts (data URLs) on the tiny Qwen3.5 fixture."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(model=str(FIXTURES / "models" / "qwen3_5_tiny"))
        cls.c = cls.server.client()
        cls.model = cls.c.models.list().data[0].id
        cls.expected = json.loads((FIXTURES / "models" / "qwen3_5_tiny" /
                                   "expected.json").read_text())["chat_prompts"]

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "mstar-serve should exit 0 on SIGTERM"

    def chat(self, messages, **kw):
        return self.c.chat.completions.create(
            model=self.model, messages=messages, max_tokens=8, temperature=0,
            extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)

    def test_image_parts_give_transformers_greedy_tokens(self):
        for case in self.expected:
            messages = json.loads(json.dumps(case["messages"]))
            for part in messages[0]["content"]:
                if part["type"] == "image_url":
                    part["image_url"]["url"] = data_url(part["image_url"]["url"])
            r = self.chat(messages)
            self.assertEqual(r.model_dump()["choices"][0]["token_ids"], case["generated_ids"],
                             case["images"])
            self.assertEqual(r.usage.prompt_tokens, len(case["prompt_ids"]))

    def test_urls_to_fetch_and_bad_images_are_bad_requests_naming_the_part(self):
        def with_url(url):
            return [{"role": "user", "content": [{"type": "text", "text": "look"},
                                                 {"type": "image_url", "image_url": {"url": url}}]}]
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(with_url("https://example.com/cat.png"))
        self.assertEqual(e.exception.body["param"], "messages[0].content[1].image_url.url")
        self.assertIn("fetches nothing", e.exception.body["message"])
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(with_url("data:image/png;base64," +
                               base64.b64encode(b"not an image").decode()))
        self.assertEqual(e.exception.body["param"], "messages[0].content[1]")
        self.assertIn("the image cannot be read", e.exception.body["message"])


class Keys(unittest.TestCase):
    def test_a_missing_or_wrong_key_is_401_and_the_right_one_works(self):
        server = Server("--api-key", "s3cret")
        try:
            with self.assertRaises(openai.AuthenticationError):
                server.client("wrong").models.list()
            ok = server.client("s3cret")
            self.assertEqual(len(ok.models.list().data), 1)
        finally:
            self.assertEqual(server.stop(), 0)


class Curl(unittest.TestCase):
    def test_sse_framing_and_headers(self):
        server = Server()
        try:
            body = json.dumps({"prompt": "Hi", "max_tokens": 3, "temperature": 0,
                               "stream": True, "ignore_eos": True})
            out = subprocess.run(
                ["curl", "-sS", "--raw", "-i", "--max-time", "30", "-H",
                 "Content-Type: application/json", "-d", body, server.url + "/v1/completions"],
                capture_output=True, check=True).stdout.decode("utf-8", "replace")
            head, _, raw = out.partition("\r\n\r\n")
            self.assertTrue(head.startswith("HTTP/1.1 200"), head)
            self.assertIn("content-type: text/event-stream", head.lower())
            self.assertIn("transfer-encoding: chunked", head.lower())
            self.assertIn("cache-control: no-cache", head.lower())
            # Chunked framing: hex size CRLF payload CRLF ... 0 CRLF CRLF;
            # every payload is whole SSE events.
            events, rest = [], raw
            while True:
                size_line, _, rest = rest.partition("\r\n")
                size = int(size_line, 16)
                if size == 0:
                    break
                payload = rest.encode()[:size].decode()
                rest = rest.encode()[size:].decode()
                self.assertTrue(rest.startswith("\r\n"))
                rest = rest[2:]
                self.assertTrue(payload.startswith("data: ") and payload.endswith("\n\n"), payload)
                events += [e for e in payload.split("\n\n") if e]
            self.assertEqual(events[-1], "data: [DONE]")
            self.assertEqual(len(events), 4, events)  # three tokens, then [DONE]
            plain = subprocess.run(["curl", "-sS", "-i", "--max-time", "10", server.url + "/health"],
                                   capture_output=True, check=True).stdout.decode()
            self.assertTrue(plain.startswith("HTTP/1.1 200"))
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
