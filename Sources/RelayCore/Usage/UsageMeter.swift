import JSON
import SSE
import Usage

/// One exchange's token accounting, as a value: the request body in (include_usage injected, prompt estimated,
/// model read), a copy of each response body delivery in (the `UsageTap`), the client's bytes through the
/// `UsageEventStripper` when the relay injected the usage request, and the final `Usage` out. No I/O; owned by
/// the exchange's loop queue, like the exchange.
///
/// The client's bytes are never altered, except for the one usage-only event the relay caused by injecting
/// `stream_options.include_usage` (README, "Usage and cost"); the tap sees a copy and cannot delay them.
package struct UsageMeter: Sendable {
    package struct Settings: Sendable, Equatable {
        package var provider: Provider
        /// The route adds `stream_options.include_usage` to streaming chat requests (`Route.injectsUsage`).
        var injectsUsage: Bool
        /// The route's model allowlist: the metrics' `model` label values (`UsageLabels.model`).
        var modelAllowlist: [String]?
        /// The most the tap holds for one event (or a JSON body): the bound on its copy, per stream.
        var maxTapBytes: Int
        /// The endpoint bills what it answers (not `Endpoint.free`). A retrieval (`GET /v1/responses/ID`) answers
        /// a stored object with the usage of a generation already charged: it is not read, and costs nothing.
        var bills: Bool
        /// What each image, audio clip or inline file adds to a prompt estimate at least (`budgets.mediaTokens`).
        var mediaTokens: Int

        package init(provider: Provider = .openai, injectsUsage: Bool = false, modelAllowlist: [String]? = nil,
             maxTapBytes: Int = UsageTap.defaultMaxEventBytes, bills: Bool = true,
             mediaTokens: Int = BudgetConfiguration.defaultMediaTokens) {
            self.provider = provider
            self.injectsUsage = injectsUsage
            self.modelAllowlist = modelAllowlist
            self.maxTapBytes = maxTapBytes
            self.bills = bills
            self.mediaTokens = mediaTokens
        }
    }

    package let settings: Settings
    /// The model the request body (or a Gemini path) names; client text, for the access log.
    package private(set) var requestedModel: String?
    /// The request body as the plan read it (shared, not copied): the prompt estimate (`PromptEstimate`) is counted
    /// from it only when the provider gives no prompt count, so a request the provider accounts for costs no walk.
    private var requestDocument: JSONDocument?
    /// The prompt estimate, when a result needs it.
    package var estimatedPrompt: Int? { requestDocument.map { PromptEstimate.tokens($0, mediaTokens: settings.mediaTokens) } }
    /// The request brings or asks for audio (`RequestBodyPlan.usesAudio`, read with budgets): an estimate counts
    /// every token as audio, at the audio prices, since which of them were audio is unknown.
    private var usesAudio = false
    /// The relay added the usage request: the client's stream loses the usage-only event.
    private(set) var injected = false
    package private(set) var tap: UsageTap?
    private(set) var stripper: UsageEventStripper?
    /// Line and event ends of a 2xx event stream, found once per delivery (`scan(_:)`) for the tap, the stripper
    /// and the exchange's budget cut.
    private(set) var events: SSEBoundaryScanner?
    /// A 2xx head arrived: what follows is an answer the provider bills.
    private var answered = false
    /// An error head arrived: nothing to bill.
    private var refused = false

    package init(settings: Settings) {
        self.settings = settings
    }

    /// The `model` metrics label: the requested model if the route allows it by name, else `other`.
    package var modelLabel: String { UsageLabels.model(requestedModel, allowlist: settings.modelAllowlist) }

    /// The request is whole and its plan made (`RequestBodyPlan`): the model it names, the body as read, and
    /// whether the relay asked for usage the client did not.
    package mutating func requestPlanned(_ plan: RequestBodyPlan, path: String) {
        requestedModel = plan.model ?? UsageLabels.requestedModel(path: path)
        requestDocument = plan.document
        injected = plan.injected
        usesAudio = plan.usesAudio
    }

    /// A request without a body (a GET): only a Gemini path can name the model.
    package mutating func bodylessRequest(path: String) {
        requestedModel = UsageLabels.requestedModel(path: path)
    }

    /// The provider's response head. Only a 2xx answer is read for usage (an error is not billed); the stripper
    /// runs only on the event stream it was meant for.
    package mutating func responseHead(status: Int, contentType: String?) {
        guard (200..<300).contains(status) else {
            refused = true
            return
        }
        answered = true
        guard settings.bills else { return }
        tap = UsageTap(provider: settings.provider, contentType: contentType, maxJSONBytes: settings.maxTapBytes,
                       maxEventBytes: settings.maxTapBytes)
        guard tap?.format == .eventStream else { return }
        events = SSEBoundaryScanner()
        if injected { stripper = UsageEventStripper(maxEventBytes: settings.maxTapBytes) }
    }

    /// The line and event ends of a delivery: the one walk over its bytes that `observe` and `clientBytes` share.
    /// Empty (nothing walked) unless the answer is a 2xx event stream.
    package mutating func scan(_ bytes: UnsafeRawBufferPointer) -> SSEBoundaryScanner.Scan {
        events == nil ? Self.noScan : events!.scan(bytes)
    }

    private static let noScan = SSEBoundaryScanner.Scan()

    /// The bytes so far end with a whole event (or none came, or the answer is no event stream): bytes of the
    /// relay's own can go to the client here.
    package var atEventBoundary: Bool { events?.atEventBoundary ?? true }

    /// `atEventBoundary`, and not a lone CR after a line end whose LF may come next
    /// (`SSEBoundaryScanner.atSettledEventBoundary`): where the budget cut's closing event may go.
    package var atSettledEventBoundary: Bool { events?.atSettledEventBoundary ?? true }

    /// A copy of a response body delivery, exactly as received, with its `scan(_:)`.
    package mutating func observe(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan) {
        tap?.feed(bytes, scan: events == nil ? nil : scan)
    }

    /// `observe`, then `countedOutput`: a budget-guarded delivery's one call on the meter's own storage. Read as a
    /// property of the exchange's meter, `countedOutput` copied the whole meter (retaining and releasing all it
    /// holds) on every delivery: about 800 instructions of the 1.4 k a guarded stream added per event.
    package mutating func observeCounting(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan) -> Int {
        tap?.feed(bytes, scan: events == nil ? nil : scan)
        return tap?.estimatedOutputTokens ?? 0
    }

    /// What of a delivery goes to the client: the delivery itself unless the relay injected the usage request.
    package mutating func clientBytes(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan) -> UsageEventStripper.Output {
        stripper == nil ? .unchanged : stripper!.process(bytes, scan: scan)
    }

    /// The response ended cleanly: bytes the stripper still held (an event without its closing empty line).
    package mutating func finishClientBytes() -> [UInt8] {
        stripper == nil ? [] : stripper!.finish()
    }

    /// Output counted so far, in tokens: the larger of the content events and the content text's bytes / 4
    /// (`UsageTap.estimatedOutputTokens`); what a budget guard watches.
    package var countedOutput: Int { tap?.estimatedOutputTokens ?? 0 }

    /// The provider's own counts are complete (a drain can stop).
    package var hasProviderUsage: Bool { tap?.usage().source == .provider }

    /// The stream's finish chunk went by and its usage chunk has not come yet (OpenAI chat sends them apart): a
    /// client leaving now leaves the relay reading on, briefly, for the counts (`ExchangeStateMachine.clientClosed`).
    package var awaitsUsageAfterFinish: Bool {
        guard let tap, tap.finishSeen else { return false }
        return tap.usage().source != .provider
    }

    /// The exchange's usage, at its end. With a 2xx answer, the tap's (provider's, else an estimate whose output
    /// is at least `outputFloor`, the exchange's cancel floor); with an error answer or a call that never
    /// connected, `.none`; a call the provider may have started on (the client left or the first byte timed out
    /// before the head) costs at least the prompt, and `outputFloor` (a whole answer's time at the provider): an
    /// estimate.
    package func usage(callReachedProvider: Bool, outputFloor: Int = 0) -> Usage {
        usageAndReportedModel(callReachedProvider: callReachedProvider, outputFloor: outputFloor).usage
    }

    /// `usage(callReachedProvider:outputFloor:)` and the model the provider reported (`UsageTap.reportedModel`;
    /// nil without a tap), read together (`UsageTap.usageAndReportedModel`).
    ///
    /// `reservedOutput`: the output the exchange reserved. An answer with output the tap could not read (a JSON
    /// answer or an event past its bound, or an answer in a format it does not read: `UsageTap.missedOutput`) is
    /// charged at least that without the provider's counts. (Decided
    /// here, in the one call the exchange makes at its end: a property of the meter read from the exchange copies
    /// the whole meter.)
    package func usageAndReportedModel(callReachedProvider: Bool, outputFloor: Int = 0,
                                       reservedOutput: Int = 0) -> (usage: Usage, reportedModel: String?) {
        if let tap {
            let (counted, model) = tap.usageAndReportedModel()
            // The provider's own prompt count needs no estimate.
            if counted.source == .provider { return (counted, model) }
            let outputFloor = tap.missedOutput ? max(outputFloor, reservedOutput) : outputFloor
            var estimate = tap.usage(estimatedPrompt: estimatedPrompt)
            if outputFloor > estimate.completion {
                estimate.completion = outputFloor
                estimate.source = .estimate
            }
            return (audioEstimate(estimate), model)
        }
        guard callReachedProvider, !refused, !answered, estimatedPrompt != nil || outputFloor > 0 else { return (.none, nil) }
        return (audioEstimate(Usage(prompt: estimatedPrompt ?? 0, completion: outputFloor, source: .estimate)), nil)
    }

    /// An estimate of a request with audio: all of it audio (never less than the provider's partial audio counts).
    private func audioEstimate(_ usage: Usage) -> Usage {
        guard usesAudio, usage.source == .estimate else { return usage }
        var audio = usage
        audio.audioPrompt = usage.prompt
        audio.audioCompletion = usage.completion
        audio.imageCompletion = nil
        return audio
    }
}
