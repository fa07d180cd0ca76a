// Secret never prints its value, however it is turned into text.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

private let value = "sk-live-DO-NOT-PRINT-0123456789"

@Suite struct SecretTests {
    @Test func everyTextualFormIsRedacted() {
        let secret = Secret(value)
        let forms: [String] = [
            secret.description, secret.debugDescription, "\(secret)", String(describing: secret),
            String(reflecting: secret), "\(Optional(secret) as Any)", "\([secret])", "\(["k": secret])",
            String(describing: Optional(secret)),
        ]
        for form in forms {
            #expect(!form.contains(value), "\(form)")
            #expect(!form.contains("sk-"), "\(form)")
            #expect(form.contains("<redacted>"), "\(form)")
        }
        #expect(secret.description == "<redacted>")
        #expect(secret.debugDescription == "<redacted>")
        #expect("\(secret)" == "<redacted>")
        #expect(String(describing: secret) == "<redacted>")
    }

    @Test func printingGoesThroughTheRedaction() {
        var out = ""
        print(Secret(value), to: &out)
        debugPrint(Secret(value), to: &out)
        #expect(out == "<redacted>\n<redacted>\n")
    }

    @Test func containersOfSecretsAreRedactedToo() {
        let upstream = RelayConfiguration.Upstream(name: "openai", baseURL: "https://api.openai.com", key: Secret(value))
        var configuration = RelayConfiguration()
        configuration.upstreams["openai"] = upstream
        for text in [String(describing: upstream), String(reflecting: upstream), "\(configuration)"] {
            #expect(!text.contains(value), "\(text)")
        }
    }

    @Test func dumpDoesNotRevealTheValue() {
        var out = ""
        dump(Secret(value), to: &out)
                    #expect(!out.contains(value), "\(out)")
            #expect(Mirror(reflecting: Secret(value)).children.isEmpty)
    }

    @Test func theValueIsOnlyReachableOnPurpose() {
        let secret = Secret(" \(value) ")
        #expect(secret.revealForHeader() == " \(value) ")
        #expect(!secret.isEmpty)
        #expect(Secret("").isEmpty)
        #expect(Secret("a") == Secret("a"))
        #expect(Secret("a") != Secret("b"))
    }
}
