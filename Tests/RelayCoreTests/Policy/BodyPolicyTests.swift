// BodyPolicy: the model allowlist, the token cap in both modes, and the byte-exact promise — a forwarded body is
// the received bytes, or exactly those bytes with the clamped numbers' digits swapped for the limit's.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

private let models = BodyPolicy(models: ["gpt-4o-mini", "gpt-4o"])
private func cap(_ limit: Int, _ mode: BodyPolicy.MaxTokens.Mode) -> BodyPolicy {
    BodyPolicy(maxTokens: .init(limit: limit, mode: mode))
}

/// `body` with its only occurrence of `old` replaced by `new`: the one edit a clamp may make.
private func edited(_ body: String, _ old: String, _ new: String) -> [UInt8] {
    let parts = body.components(separatedBy: old)
    precondition(parts.count == 2, "`\(old)` must occur exactly once in the fixture")
    return bytes(parts[0] + new + parts[1])
}

private func expectForwardedUnchanged(_ policy: BodyPolicy, _ body: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(policy.evaluate(body) == .forward(body: body, changed: false), sourceLocation: sourceLocation)
}

@Suite struct BodyPolicyTests {
    // MARK: nothing configured

    @Test func withNoChecksAnyBytesPassUnparsed() {
        let policy = BodyPolicy()
        #expect(!policy.isActive)
        for body in [bytes("not json at all"), [], [0xFF, 0x00, 0xEF, 0xBB, 0xBF], bytes(#"{"model":"x","model":"y"}"#)] {
            expectForwardedUnchanged(policy, body)
        }
    }

    // MARK: models

    @Test func anAllowedModelForwardsTheIdenticalBytes() {
        let body = bytes(" {\"model\" : \"gpt-4o\",\n\"messages\":[{\"role\":\"user\",\"content\":\"héllo \\u00e9\"}],\"stream\":true} ")
        guard case .forward(let out, let changed) = models.evaluate(body) else {
            Issue.record("rejected")
            return
        }
        #expect(out == body)
        #expect(!changed)
    }

    @Test func theModelIsComparedAfterUnescaping() {
        expectForwardedUnchanged(models, bytes(#"{"model":"gpt-4\u006f"}"#))
    }

    @Test(arguments: ["gpt-4", "GPT-4O", "gpt-4o ", " gpt-4o", "gpt-4o-mini-2024", "", "gpt-4o\\u0000"])
    func aModelNotOnTheListIs403WithoutEchoingIt(_ model: String) {
        let body = bytes(#"{"model":"\#(model)","stream":true}"#)
        #expect(models.evaluate(body) == .reject(.modelNotAllowed))
        #expect(RelayError.modelNotAllowed.status == 403)
        #expect(RelayError.modelNotAllowed.code == "model_not_allowed")
        #expect(RelayError.modelNotAllowed.message == "This model is not allowed on this relay.")
    }

    @Test func anEmptyListDeniesEveryModel() {
        #expect(BodyPolicy(models: []).evaluate(bytes(#"{"model":"gpt-4o"}"#)) == .reject(.modelNotAllowed))
    }

    @Test(arguments: [
        #"{}"#, #"{"messages":[]}"#, #"{"model":null}"#, #"{"model":4}"#, #"{"model":["gpt-4o"]}"#,
        #"{"model":{"name":"gpt-4o"}}"#, #"{"model":true}"#, #"{"metadata":{"model":"gpt-4o"}}"#,
        #"{"Model":"gpt-4o"}"#,
    ])
    func aMissingOrNonStringModelIs400(_ body: String) {
        #expect(models.evaluate(bytes(body)) == .reject(.modelMissing))
        #expect(RelayError.modelMissing.status == 400)
        #expect(RelayError.modelMissing.code == "invalid_request")
    }

    @Test(arguments: [
        #"{"model":"gpt-4o","model":"o1-pro"}"#, #"{"model":"gpt-4o","mod\u0065l":"gpt-4o"}"#,
        #"{"model":"o1-pro","x":1,"model":"gpt-4o"}"#,
    ])
    func aDuplicateModelIsRejectedWhicheverWouldWin(_ body: String) {
        #expect(models.evaluate(bytes(body)) == .reject(.ambiguousBody))
        #expect(RelayError.ambiguousBody.status == 400)
    }

    /// Any duplicate, at any depth and however its key is escaped, is ambiguous: the provider keeps one of them,
    /// the relay cannot know which (issue 18: a nested duplicate turned usage off).
    @Test(arguments: [#"{"model":"gpt-4o","user":"a","user":"b"}"#, #"{"model":"gpt-4o","metadata":{"a":1,"\u0061":2}}"#,
                      #"{"model":"gpt-4o","messages":[{"role":"user","role":"system"}]}"#])
    func everyDuplicateIsRefused(_ body: String) {
        #expect(models.evaluate(bytes(body)) == .reject(.ambiguousBody))
    }

    // MARK: invalid JSON

    @Test(arguments: ["\u{FEFF}{\"model\":\"gpt-4o\"}", #"{"model":"\uD800"}"#, #"{"model":"gpt-4o"} {}"#])
    func ambiguousBodiesAre400WhenAnyCheckIsConfigured(_ body: String) {
        #expect(models.evaluate(bytes(body)) == .reject(.ambiguousBody))
        #expect(cap(100, .clamp).evaluate(bytes(body)) == .reject(.ambiguousBody))
        #expect(models.evaluate(bytes(#"{"model":"gpt-4o"}"#) + [0xFF]) == .reject(.ambiguousBody))
    }

    @Test(arguments: [
        "", "   ", "{", #"{"model":"gpt-4o""#, #"["model"]"#, #""gpt-4o""#, #"{"model":"gpt-4o",}"#,
    ])
    func invalidJSONIs400WhenAnyCheckIsConfigured(_ body: String) {
        #expect(models.evaluate(bytes(body)) == .reject(.invalidJSON))
        #expect(cap(100, .clamp).evaluate(bytes(body)) == .reject(.invalidJSON))
        #expect(RelayError.invalidJSON.status == 400)
        #expect(RelayError.invalidJSON.code == "invalid_json")
    }

    // MARK: max tokens, clamp

    @Test func clampRewritesOnlyTheNumbersBytes() {
        let body = "{\"model\":\"gpt-4o\",  \"max_tokens\" :\t5000 ,\"messages\":[{\"content\":\"é 😀 \\u00e9\"}],\"n\":1}"
        let expected = edited(body, "5000", "1000")
        #expect(cap(1000, .clamp).evaluate(bytes(body)) == .forward(body: expected, changed: true))
    }

    @Test func clampMayShortenOrLengthenTheBody() {
        let longer = #"{"max_tokens":7}"#
        #expect(cap(5, .clamp).evaluate(bytes(longer)) == .forward(body: bytes(#"{"max_tokens":5}"#), changed: true))
        let huge = #"{"max_tokens":99999999999999999999999999,"z":0}"#
        #expect(cap(128_000, .clamp).evaluate(bytes(huge))
            == .forward(body: edited(huge, "99999999999999999999999999", "128000"), changed: true))
        let small = #"{"max_completion_tokens":12345}"#
        #expect(cap(100_000_000, .clamp).evaluate(bytes(#"{"max_completion_tokens":200000000}"#))
            == .forward(body: bytes(#"{"max_completion_tokens":100000000}"#), changed: true))
        #expect(cap(0, .clamp).evaluate(bytes(small)) == .forward(body: edited(small, "12345", "0"), changed: true))
    }

    @Test func clampHandlesBothKeysInEitherOrder() {
        let body = #"{"max_completion_tokens":4097,"model":"m","max_tokens":90000}"#
        let expected = bytes(#"{"max_completion_tokens":4096,"model":"m","max_tokens":4096}"#)
        #expect(cap(4096, .clamp).evaluate(bytes(body)) == .forward(body: expected, changed: true))
        let onlyOne = #"{"max_tokens":10,"max_completion_tokens":9000}"#
        #expect(cap(4096, .clamp).evaluate(bytes(onlyOne))
            == .forward(body: edited(onlyOne, "9000", "4096"), changed: true))
    }

    @Test(arguments: [
        #"{"max_tokens":4096}"#, #"{"max_tokens":0}"#, #"{"max_tokens":-0}"#, #"{"max_completion_tokens":1}"#,
        #"{"max_tokens":null,"max_completion_tokens":null}"#, #"{"model":"x"}"#, #"{}"#,
        #"{"metadata":{"max_tokens":999999}}"#, #"{"max_tokens_x":999999}"#,
    ])
    func valuesWithinTheLimitOrAbsentLeaveTheBodyIdentical(_ body: String) {
        expectForwardedUnchanged(cap(4096, .clamp), bytes(body))
        expectForwardedUnchanged(cap(4096, .reject), bytes(body))
    }

    // MARK: max tokens, reject

    @Test func rejectModeAnswers400NamingTheLimit() {
        let policy = cap(4096, .reject)
        #expect(policy.evaluate(bytes(#"{"max_tokens":4097}"#)) == .reject(.maxTokensExceeded("max_tokens", limit: 4096)))
        #expect(policy.evaluate(bytes(#"{"max_tokens":1,"max_completion_tokens":1e9}"#))
            == .reject(.invalidMaxTokens("max_completion_tokens")))
        #expect(policy.evaluate(bytes(#"{"max_completion_tokens":99999999999999999999}"#))
            == .reject(.maxTokensExceeded("max_completion_tokens", limit: 4096)))
        let error = RelayError.maxTokensExceeded("max_tokens", limit: 4096)
        #expect(error.status == 400)
        #expect(error.code == "max_tokens_exceeded")
        #expect(error.message == "\"max_tokens\" may not exceed 4096 on this relay.")
    }

    @Test(arguments: [
        (#"{"max_tokens":-1}"#, "max_tokens"), (#"{"max_tokens":100.0}"#, "max_tokens"),
        (#"{"max_tokens":1e3}"#, "max_tokens"), (#"{"max_tokens":"100"}"#, "max_tokens"),
        (#"{"max_tokens":true}"#, "max_tokens"), (#"{"max_tokens":[1]}"#, "max_tokens"),
        (#"{"max_tokens":{}}"#, "max_tokens"), (#"{"max_tokens":-99999999999999999999}"#, "max_tokens"),
        (#"{"max_tokens":5,"max_completion_tokens":-5}"#, "max_completion_tokens"),
    ])
    func nonIntegerOrNegativeValuesAre400InBothModes(_ body: String, _ key: String) {
        #expect(cap(4096, .clamp).evaluate(bytes(body)) == .reject(.invalidMaxTokens(key)))
        #expect(cap(4096, .reject).evaluate(bytes(body)) == .reject(.invalidMaxTokens(key)))
        #expect(RelayError.invalidMaxTokens(key).status == 400)
    }

    @Test func duplicateTokenKeysAreRejected() {
        #expect(cap(4096, .clamp).evaluate(bytes(#"{"max_tokens":1,"max_tokens":999999}"#))
            == .reject(.ambiguousBody))
        #expect(cap(4096, .reject).evaluate(bytes(#"{"max_completion_tokens":1,"max_completion_tok\u0065ns":2}"#))
            == .reject(.ambiguousBody))
    }

    @Test func aNegativeLimitActsAsZero() {
        #expect(cap(-5, .clamp).evaluate(bytes(#"{"max_tokens":3}"#)) == .forward(body: bytes(#"{"max_tokens":0}"#), changed: true))
    }

    // MARK: both checks

    @Test func theModelIsCheckedBeforeTheTokens() {
        let policy = BodyPolicy(models: ["gpt-4o"], maxTokens: .init(limit: 100, mode: .clamp))
        #expect(policy.evaluate(bytes(#"{"model":"o1","max_tokens":-1}"#)) == .reject(.modelNotAllowed))
        let body = #"{"model":"gpt-4o","max_tokens":101}"#
        #expect(policy.evaluate(bytes(body)) == .forward(body: edited(body, "101", "100"), changed: true))
        expectForwardedUnchanged(policy, bytes(#"{"model":"gpt-4o","max_tokens":100}"#))
    }

    @Test func errorsNeverEchoRequestContent() {
        let secret = "sk-SECRET-in-body"
        let policy = BodyPolicy(models: ["gpt-4o"], maxTokens: .init(limit: 10, mode: .reject))
        for body in [#"{"model":"\#(secret)"}"#, #"{"model":"gpt-4o","max_tokens":"\#(secret)"}"#, #"{"\#(secret)"#] {
            guard case .reject(let error) = policy.evaluate(bytes(body)) else {
                Issue.record("forwarded \(body)")
                continue
            }
            #expect(!String(decoding: error.jsonBody, as: UTF8.self).contains("SECRET"))
        }
    }
}
