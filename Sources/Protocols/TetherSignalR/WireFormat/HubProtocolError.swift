public import TetherCore

/// A SignalR protocol failure: the exact text the reference implementations use, plus its kind.
///
/// `message` is what the ASP.NET Core implementations say for the same input (for example
/// "Missing required property 'target'."), so logs and interop tests line up with theirs. It
/// never contains secrets: access tokens are never part of a protocol message.
public typealias HubProtocolError = TetherError<HubProtocolErrorKind>

/// The families of SignalR protocol failures (`HubProtocolError`).
public enum HubProtocolErrorKind: String, ErrorKind {
    /// A hub message that is not valid for its protocol (bad JSON, wrong types, missing fields).
    case invalidMessage
    /// A message larger than the configured maximum, or a length prefix above 2 GB.
    case messageTooLarge
    /// The input ended inside a message.
    case incompleteMessage
    /// A handshake request or response that is not valid.
    case invalidHandshake
    /// A negotiate response that is not valid.
    case invalidNegotiateResponse
    /// A negotiate response whose `error` refuses the connection (`message` is the server's text).
    case negotiateRejected
}

extension TetherError where Family == HubProtocolErrorKind {
    static func invalid(_ message: String) -> HubProtocolError { HubProtocolError(.invalidMessage, message) }

    /// "Message is incomplete.": the input ended inside a record or frame.
    public static var incomplete: HubProtocolError { HubProtocolError(.incompleteMessage, "Message is incomplete.") }

    static var errorReadingJSON: HubProtocolError { invalid("Error reading JSON.") }
}
