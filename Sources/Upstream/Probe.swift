import CCurl

/// A one-shot blocking GET, for `sse-relay --probe URL` (a container health check without curl in the image).
public enum Probe {
    /// The response status, or nil if no response came within `timeoutSeconds`.
    public static func status(of url: String, timeoutSeconds: Double) -> Int? {
        guard let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        _ = ccurl_easy_setopt_str(easy, CURLOPT_URL, url)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(timeoutSeconds * 1000)))
        _ = ccurl_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
        guard curl_easy_perform(easy) == CURLE_OK else { return nil }
        var status = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }
}
