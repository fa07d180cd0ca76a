/// One dispatched Server-Sent Event (WHATWG HTML, "Server-sent events", §9.2.6 "Interpreting an event stream").
public struct SSEEvent: Sendable, Hashable {
    /// The `event` field's value; "message" when the block had none (or an empty one), as the standard says.
    public var event: String
    /// The `data` lines of the block joined with "\n" (no trailing "\n").
    public var data: String
    /// The stream's last event ID when this event was dispatched: the most recent `id` field (which persists
    /// across events), or "" if none was ever set or the last one was empty.
    public var id: String
    /// The reconnection time (milliseconds) set by a valid `retry` field since the previous dispatched event,
    /// if any. The standard makes `retry` a property of the stream, not of an event; it is surfaced here so a
    /// consumer that only sees events still learns it. `SSEParser.reconnectionTime` holds the current value.
    public var retry: Int?

    public init(event: String = "message", data: String, id: String = "", retry: Int? = nil) {
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
    }
}
