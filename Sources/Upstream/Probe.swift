import CCurl
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One-shot blocking requests outside the event loops: `sse-relay --probe URL` (a container health check without
/// curl in the image) and the warm-up's client (`WarmUp`).
public enum Probe {
    /// The response status, or nil if no response came within `timeoutSeconds`.
    public static func status(of url: String, timeoutSeconds: Double) -> Int? {
        guard let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        _ = ccurl_easy_setopt_str(easy, CURLOPT_URL, url)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(timeoutSeconds * 1000)))
        _ = ccurl_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        if LoopbackURL.bypassesProxy(url) { _ = ccurl_easy_setopt_str(easy, CURLOPT_NOPROXY, "*") }
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
        guard curl_easy_perform(easy) == CURLE_OK else { return nil }
        var status = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    /// What `post` received: the status, the Content-Type, and the body as curl decoded it (no chunk framing).
    public struct Answer: Sendable, Equatable {
        public var status: Int
        public var contentType: String?
        public var body: [UInt8]

        public init(status: Int, contentType: String?, body: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// POSTs `body` with `headers` (whole lines, `Name: value`) to `url` and reads the whole answer, keeping at most
    /// `maxBodyBytes` of it. On failure, curl's reason.
    public static func post(_ url: String, headers: [String], body: [UInt8], timeoutSeconds: Double,
                            maxBodyBytes: Int = 1 << 20) -> Result<Answer, ProbeError> {
        guard let easy = curl_easy_init() else { return .failure(ProbeError(description: "curl_easy_init failed")) }
        defer { curl_easy_cleanup(easy) }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in headers { list = curl_slist_append(list, line) }
        defer { curl_slist_free_all(list) }
        let sink = Unmanaged.passRetained(BodySink(limit: maxBodyBytes))
        defer { sink.release() }
        _ = ccurl_easy_setopt_str(easy, CURLOPT_URL, url)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(timeoutSeconds * 1000)))
        _ = ccurl_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        if LoopbackURL.bypassesProxy(url) { _ = ccurl_easy_setopt_str(easy, CURLOPT_NOPROXY, "*") }
        _ = ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
        _ = ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, sink.toOpaque())
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let sink = Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            guard sink.bytes.count + n <= sink.limit else { return 0 }   // over the limit: curl stops (CURLE_WRITE_ERROR)
            sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        // COPYPOSTFIELDS: curl keeps its own copy, so `body` need not outlive this line.
        let code = body.isEmpty ? ccurl_easy_setopt_str(easy, CURLOPT_COPYPOSTFIELDS, "")
            : body.withUnsafeBytes { ccurl_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress!)) }
        guard code == CURLE_OK else { return .failure(ProbeError(description: "cannot set the body")) }
        let result = curl_easy_perform(easy)
        guard result == CURLE_OK else { return .failure(ProbeError(description: String(cString: curl_easy_strerror(result)))) }
        var status = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var type: UnsafeMutablePointer<CChar>?
        _ = ccurl_easy_getinfo_str(easy, CURLINFO_CONTENT_TYPE, &type)
        return .success(Answer(status: status, contentType: type.map { String(cString: $0) }, body: sink.takeUnretainedValue().bytes))
    }

    public struct ProbeError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The body `post` collects. Used by the thread in `curl_easy_perform` only.
    private final class BodySink {
        let limit: Int
        var bytes: [UInt8] = []
        init(limit: Int) { self.limit = limit }
    }
}

/// A URL to this host: a loopback IPv4 address, `[::1]` or `localhost`. libcurl 7.88 sends even those through a
/// proxy named in the environment (`http_proxy`, `ALL_PROXY`, unless `NO_PROXY` lists them), where they cannot
/// mean this host: a container's health check (`--probe`), the start-up warm-up and a model server beside the
/// relay would fail. Such a URL goes direct (`CURLOPT_NOPROXY` "*"). Read from the URL's text, no parsing
/// library: `http(s)://` then the host up to a port, path, query or fragment; user info is not expected and makes
/// it not match.
public enum LoopbackURL {
    /// `url` must go direct: a proxy is named in the environment and `url` is this host's. Without a proxy
    /// variable nothing is set (setting `CURLOPT_NOPROXY` cost a loopback request 35 k instructions in curl).
    public static func bypassesProxy(_ url: String) -> Bool { proxyInEnvironment && matches(url) }

    /// A proxy variable libcurl reads is set (read once: the environment does not change under a running relay).
    static let proxyInEnvironment: Bool = {
        let names: [String] = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
        return names.contains { name in
            guard let value = getenv(name) else { return false }
            return value.pointee != 0
        }
    }()

    public static func matches(_ url: String) -> Bool {
        var rest = Substring(url)
        if rest.lowercased().hasPrefix("http://") { rest = rest.dropFirst(7) } else if rest.lowercased().hasPrefix("https://") {
            rest = rest.dropFirst(8)
        } else { return false }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.contains("@") { return false }
        if authority.hasPrefix("[") { return authority.hasPrefix("[::1]") }
        let host = authority.prefix { $0 != ":" }.lowercased()
        if host == "localhost" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127"
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }
}
