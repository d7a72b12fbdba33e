#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How much a client logs, least to most severe (the official SignalR clients' levels). The same
/// for both clients.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    /// Every message sent and received (credentials and tokens hidden).
    case trace
    /// The connection's steps.
    case debug
    /// Connected, resumed, connection lost, stopped.
    case information
    /// Something the app may want to know of (a lost connection, an unhandled call).
    case warning
    /// A failure.
    case error
    /// A failure that ends the connection for good.
    case critical
    /// Nothing (the default: a client says nothing unless the app asks).
    case none

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Where a client's log lines go: the level and the text (which never holds a password or a
/// token).
public typealias LogHandler = @Sendable (LogLevel, String) -> Void

/// A log handler that writes `tether: LEVEL: TEXT` lines to standard error.
public let logToStandardError: LogHandler = { level, text in
    let line = Array("tether: \(level): \(text)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// A client's logging: a level filter in front of the app's handler. The text is built only when
/// its level is on.
@_spi(TetherInternal) public struct ConnectionLog: Sendable {
    @usableFromInline package let level: LogLevel
    @usableFromInline package let handler: LogHandler

    @usableFromInline package init(level: LogLevel, handler: @escaping LogHandler) {
        self.level = level
        self.handler = handler
    }

    @inlinable package func trace(_ text: () -> String) {
        if level <= .trace { handler(.trace, text()) }
    }
    @inlinable package func debug(_ text: @autoclosure () -> String) {
        if level <= .debug { handler(.debug, text()) }
    }
    @inlinable package func info(_ text: @autoclosure () -> String) {
        if level <= .information { handler(.information, text()) }
    }
    @inlinable package func warning(_ text: @autoclosure () -> String) {
        if level <= .warning { handler(.warning, text()) }
    }
    @inlinable package func error(_ text: @autoclosure () -> String) {
        if level <= .error { handler(.error, text()) }
    }
}
