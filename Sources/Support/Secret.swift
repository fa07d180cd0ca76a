/// A credential (provider key, client token). It never prints: `description`, `debugDescription` and string
/// interpolation all give `<redacted>`, so a secret that reaches a log line or an error by mistake stays hidden.
/// The only way to the value is `revealForHeader()`, used where the key is put on the upstream request.
package struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String
    package init(_ value: String) { self.value = value }
    package var description: String { "<redacted>" }
    package var debugDescription: String { "<redacted>" }
    package var isEmpty: Bool { value.isEmpty }
    /// No children: `dump`, `Mirror` and test-failure messages show nothing of the value.
    package var customMirror: Mirror { Mirror(self, children: [:]) }
    package func revealForHeader() -> String { value }
}
