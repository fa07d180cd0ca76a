-- S3 of Tests/bench/run.sh: small non-streaming chat-completion POSTs (wrk -s post.lua URL).
-- The upstream answers a small JSON body with a Content-Length (no "stream":true, and stream=0 in the URL).
wrk.method = "POST"
wrk.body = '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"
