/// The one shape of Tether's errors below the clients (TLS, SCRAM, DNS, HTTP, the hub protocol,
/// XML streams, transports): a `kind` to switch on and a `message` for people (never a secret),
/// written `kind: message`, the format the clients' errors (`ConnectionError`) use too.
///
/// Each module names its own with its kinds, `public typealias TLSError = TetherError<TLSErrorKind>`,
/// so `TLSError.Kind` is `TLSErrorKind` and code tells errors apart by kind, never by text.
public struct TetherError<Family: ErrorKind>: Error, Hashable, Sendable, CustomStringConvertible {
    /// The family's kinds (`TLSError.Kind` is `TLSErrorKind`).
    public typealias Kind = Family

    /// What kind of failure.
    public let kind: Kind
    /// What exactly, for people.
    public let message: String

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// `kind: message`.
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// The kinds of one family of errors (`TetherError`): named cases whose raw value is the name.
public protocol ErrorKind: RawRepresentable, Hashable, Sendable where RawValue == String {}
