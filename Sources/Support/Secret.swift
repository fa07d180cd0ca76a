/// A credential (provider key, client token). It never prints: `description`, `debugDescription` and string
/// interpolation all give `<redacted>`, so a secret that reaches a log line or an error by mistake stays hidden.
/// The only way to the value is `revealForHeader()`, used where the key is put on the upstream request.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var isEmpty: Bool { value.isEmpty }
    /// No children: `dump`, `Mirror` and test-failure messages show nothing of the value.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
    public func revealForHeader() -> String { value }
}
