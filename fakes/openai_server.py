"""A local server that speaks the OpenAI chat-completions and embeddings protocol, reporting
usage like the real one, so tests run the real `openai` client against it."""
from __future__ import annotations

from contextlib import contextmanager
import json
import threading

from kbframework.testing import LocalHTTPServer


class FakeOpenAI:
    def __init__(self, reply: str = "Here is the answer [1].", prompt_tokens: int = 120, completion_tokens: int = 30,
                 delay: float = 0.0):
        self.reply, self.prompt_tokens, self.completion_tokens, self.delay = reply, prompt_tokens, completion_tokens, delay
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.server = LocalHTTPServer(self.handle)
        self.url = self.server.url + "/v1"

    def handle(self, method, path, headers, body):
        import time

        data = json.loads(body or b"{}")
        with self.lock:
            self.calls.append({"path": path, "body": data})
        if self.delay:
            time.sleep(self.delay)
        if path.endswith("/chat/completions") and (data.get("response_format") or {}).get("type") == "json_object":
            # the query planner asks for JSON: an empty plan, with its own small usage
            return 200, {}, {"id": "p1", "object": "chat.completion", "created": 0, "model": data["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
        if path.endswith("/chat/completions"):
            reply = self.reply(data) if callable(self.reply) else self.reply  # a callable sees the request
            usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                     "total_tokens": self.prompt_tokens + self.completion_tokens}
            if data.get("stream"):
                chunks = []
                for piece in reply.split(" "):
                    chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": data["model"],
                                   "choices": [{"index": 0, "delta": {"content": piece + " "}, "finish_reason": None}]})
                chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": data["model"],
                               "choices": [], "usage": usage})
                payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                return 200, {"Content-Type": "text/event-stream"}, payload
            return 200, {}, {"id": "c1", "object": "chat.completion", "created": 0, "model": data["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                          "finish_reason": "stop"}], "usage": usage}
        if path.endswith("/embeddings"):
            inputs = data["input"] if isinstance(data["input"], list) else [data["input"]]
            return 200, {}, {"object": "list", "model": data["model"],
                             "data": [{"object": "embedding", "index": i, "embedding": [0.1] * 8}
                                      for i, _ in enumerate(inputs)],
                             "usage": {"prompt_tokens": 5 * len(inputs), "total_tokens": 5 * len(inputs)}}
        return 404, {}, {"error": {"message": "not found"}}

    def completions(self) -> int:
        """Answer completions (not the planner's JSON calls)."""
        return sum(1 for c in self.calls if c["path"].endswith("/chat/completions")
                   and (c["body"].get("response_format") or {}).get("type") != "json_object")

    def close(self):
        self.server.close()


@contextmanager
def serving_as_the_llm(srv: "FakeOpenAI"):
    """Point the host's LLM settings at ``srv`` for the duration, then restore them."""
    import os

    from kbframework import config
    from kbframework.hooks import registry

    saved = {k: os.environ.get(k) for k in ("KB_LLM_BASE_URL", "OPENAI_API_KEY", "KB_LLM_MODEL")}
    os.environ.update(KB_LLM_BASE_URL=srv.url, OPENAI_API_KEY="sk-test", KB_LLM_MODEL="gpt-4o-mini")
    config.reset_config()
    registry.clear_caches()
    try:
        yield srv
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        config.reset_config()
        registry.clear_caches()
        srv.close()
