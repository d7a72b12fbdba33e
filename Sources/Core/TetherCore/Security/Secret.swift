/// A secret (a password, an access token) that never shows up in logs, error texts,
/// descriptions, dumps or the debugger's child list.
///
/// `description`, `debugDescription` and reflection all print `<redacted>`; the only way to the
/// text is `withUnsafeText` (or `utf8`), which the code that needs the secret calls at the moment
/// it needs it.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable,
    ExpressibleByStringLiteral
{
    private let text: String

    /// Wraps `text`.
    public init(_ text: String) {
        self.text = text
    }

    /// Wraps a string literal (for tests and examples; real secrets come from somewhere else).
    public init(stringLiteral value: String) {
        text = value
    }

    /// Calls `body` with the secret's text.
    public func withUnsafeText<Result>(_ body: (String) throws -> Result) rethrows -> Result {
        try body(text)
    }

    /// The secret's UTF-8 bytes.
    public var utf8: [UInt8] { Array(text.utf8) }

    /// Whether the secret is empty.
    public var isEmpty: Bool { text.isEmpty }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "Secret(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
