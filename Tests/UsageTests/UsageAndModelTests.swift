import Testing
@testable import Usage

/// `usageAndReportedModel()` walks a JSON answer once for both: it must say exactly what `usage()` and
/// `reportedModel` say, for every provider, every golden body and stream, and bodies built to trip a single walk
/// (repeated names, the names nested elsewhere, no object at the top, truncation).
@Suite struct UsageAndModelTests {
    static func check(_ provider: Provider, _ contentType: String?, _ bytes: [UInt8], _ note: String) {
        var tap = UsageTap(provider: provider, contentType: contentType)
        bytes.withUnsafeBytes { tap.feed($0) }
        let both = tap.usageAndReportedModel()
        #expect(both.usage == tap.usage(), "\(provider) \(note)")
        #expect(both.model == tap.reportedModel, "\(provider) \(note)")
    }

    @Test func goldenBodiesAndStreams() {
        for golden in GoldenStreams.all {
            Self.check(UsageTapTests.provider(golden.provider), golden.contentType, golden.body, golden.name)
        }
    }

    @Test(arguments: Provider.allCases)
    func bodiesBuiltToTripOneWalk(_ provider: Provider) {
        let bodies = [
            #"{"model":"a","usage":{"prompt_tokens":1,"completion_tokens":2},"model":"b","usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            #"{"choices":[{"message":{"model":"x","usage":{"prompt_tokens":9}}}],"model":"m-1","usage":{"input_tokens":5,"output_tokens":6}}"#,
            #"{"usage":{"input_tokens":7,"output_tokens":8,"cache_read_input_tokens":2},"model":"claude-x"}"#,
            #"{"modelVersion":"g-1","usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2}}"#,
            #"[{"model":"a","usage":{"prompt_tokens":1,"completion_tokens":2}}]"#,
            #"{"model":"a","usage":{"prompt_tokens":1,"completion_tokens":"#,
            #"{"model":"a\"b","usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            #"{"model":17,"usage":[]}"#,
            #"  {"model" : "spaced" , "usage" : {"prompt_tokens" : 1 , "completion_tokens" : 2} }  "#,
            "not json", "{}", "",
        ]
        for body in bodies {
            Self.check(provider, "application/json", Array(body.utf8), body)
            Self.check(provider, "application/json; charset=utf-8", Array(body.utf8), body)
        }
    }
}
