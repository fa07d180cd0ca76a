import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Support
import Upstream

extension RelayHandler {
    /// Builds the upstream request and the exchange for an admitted request, and starts it (the provider is
    /// called once the request is whole). The server keeps the exchange until it ends.
    func startExchange(_ admitted: AdmittedRequest, head: RequestHead, requestID: String, writer: any ResponseWriter) -> RelayExchange {
        let configuration = server.configuration
        let state = server.loopStates[writer.scheduler.index]
        let now = writer.scheduler.clock.now()
        let route = admitted.route, upstream = admitted.upstream
        let bodyless = head.framing == .none || head.method == "GET" || head.method == "HEAD"
        var request = UpstreamRequest(
            url: RequestRewriter.upstreamURL(baseURL: upstream.baseURL, route: route, path: admitted.path),
            method: head.method,
            headers: RequestRewriter.upstreamHeaders(from: head.headers, upstream: upstream,
                                                     client: writer.client, requestID: requestID),
            body: bodyless ? nil : [],   // filled when the request is whole
            connectTimeoutSeconds: configuration.timeouts.upstreamConnectSeconds,
            idleConnectionSeconds: upstream.idleConnectionSeconds)
        request.httpVersion = upstream.httpVersion
        request.caFile = upstream.caFile
        var extra = HTTPHeaders()
        for (name, value) in admitted.corsHeaders { extra.add(name: name, value: value) }
        let settings = ExchangeStateMachine.Settings(
            requestMethod: head.method, clientVersion: head.version, keepAlive: head.keepAlive && !server.isDraining,
            requestID: requestID, firstByteTimeoutSeconds: configuration.timeouts.upstreamFirstByteSeconds,
            idleTimeoutSeconds: configuration.timeouts.upstreamIdleSeconds, extraResponseHeaders: extra,
            drainMaxSeconds: route.usage.onClientCancel == .drain ? route.usage.drainMaxSeconds : nil)
        // The endpoint's shape, not the preset, chooses the readers: a Gemini route reaching Gemini's
        // OpenAI-compatible chat endpoint is read as OpenAI chat.
        let endpoint = admitted.endpoint
        let injects = route.injectsUsage(at: endpoint)
        let usage = UsageMeter.Settings(provider: endpoint.wireFormat ?? route.provider, injectsUsage: injects,
                                        modelAllowlist: route.bodyPolicy.models, bills: endpoint != .free,
                                        mediaTokens: configuration.budgets?.mediaTokens ?? BudgetConfiguration.defaultMediaTokens)
        var record = ExchangeRecord(requestID: requestID, method: head.method, path: admitted.path.path,
                                    query: admitted.path.query, route: route.prefix,
                                    upstream: upstream.name, clientAddress: writer.clientAddress, startedAt: now)
        record.identity = admitted.identity
        let server = self.server
        let exchange = RelayExchange(machine: ExchangeStateMachine(settings: settings, now: now), writer: writer,
                                     clock: writer.scheduler.clock, record: record, metrics: server.metrics,
                                     usage: usage) { ended in
            server.exchangeEnded(ended, on: state)
        }
        let budgetKey = configuration.budgets == nil ? nil : (admitted.identity ?? writer.client.limitKey)
        exchange.admission = ExchangeAdmission(
            store: server.store, address: writer.client.limitKey, identity: admitted.identity, budgetKey: budgetKey,
            budgets: configuration.budgets, routeMaxTokens: route.bodyPolicy.maxTokens?.limit, wallClock: server.wallClock)
        exchange.providerKey = upstream.key
        exchange.prices = server.prices
        exchange.attestationGate = server.attestation?.gate(route: route, head: head)
        exchange.attestationGate?.failureBucket = (server.authFailureLimiter, writer.client.limitKey)
        exchange.attestationGate?.subject = admitted.identity
        exchange.keeping = StreamKeeping(heartbeatSeconds: route.heartbeatSeconds, resume: route.resume, registry: server.streams,
                                         route: route)
        server.exchangeStarted(exchange, on: state)
        var plan = RequestBodyPlan.Settings(endpoint: endpoint, policy: route.bodyPolicy, injectsUsage: injects, budgets: nil)
        plan.allowsReferencedInput = route.referencedInput
        plan.allowsProviderTools = route.providerTools
        let failover = failoverClient(route: route, path: admitted.path, head: head, requestID: requestID, writer: writer,
                                      driver: state.driver)
        failover?.exchange = exchange
        exchange.start(request, upstream: failover ?? state.driver, plan: plan)
        return exchange
    }
}
