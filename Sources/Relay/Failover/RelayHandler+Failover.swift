import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Upstream

extension RelayHandler {
    /// The failover client of a route that has a choice (several upstreams, or an upstream with several keys);
    /// nil for a route with one upstream and at most one key, which calls the driver directly, as before pools.
    func failoverClient(route: RelayConfiguration.Route, path: RequestPath, head: RequestHead, requestID: String,
                        writer: any ResponseWriter, driver: any UpstreamClient) -> FailoverClient? {
        let configuration = server.configuration
        let upstreams = route.upstreamChain.compactMap { configuration.upstreams[$0] }
        guard upstreams.count > 1 || upstreams.contains(where: { $0.pool.count > 1 }) else { return nil }
        let targets = upstreams.map { upstream in
            var keyless = upstream
            keyless.key = nil
            keyless.keys = []
            // The key goes last, as `upstreamHeaders` adds it: an attempt differs from another only in its value.
            return FailoverClient.Target(
                name: upstream.name,
                url: RequestRewriter.upstreamURL(baseURL: upstream.baseURL, route: route, path: path),
                headers: RequestRewriter.upstreamHeaders(from: head.headers, upstream: keyless, client: writer.client, requestID: requestID),
                keyHeader: upstream.keyHeader, keyPrefix: upstream.keyPrefix, keys: upstream.pool,
                httpVersion: upstream.httpVersion, caFile: upstream.caFile, idleConnectionSeconds: upstream.idleConnectionSeconds,
                keyDisabledSeconds: upstream.keyDisabledSeconds)
        }
        return FailoverClient(targets: targets, pools: server.pools, driver: driver, loop: writer.scheduler, requestID: requestID,
                              maxAttempts: route.maxAttempts, firstByteSeconds: configuration.timeouts.upstreamFirstByteSeconds,
                              wallClock: server.wallClock)
    }
}
