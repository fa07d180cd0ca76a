#!/usr/bin/env python3
"""Reads one streamed answer through the relay with an official SDK and prints its text.
Usage: sdk_read.py openai|anthropic BASE_URL"""
import sys

kind, base = sys.argv[1], sys.argv[2]
if kind == "openai":
    import openai
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused-by-the-relay", max_retries=0)
    text = ""
    for chunk in client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                                messages=[{"role": "user", "content": "hi"}]):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    print(text)
else:
    import anthropic
    client = anthropic.Anthropic(base_url=base, api_key="unused-by-the-relay", max_retries=0)
    text = ""
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=64,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        for piece in stream.text_stream:
            text += piece
    print(text)
